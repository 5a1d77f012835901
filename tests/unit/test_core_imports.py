"""mappa.core stays pure: importing it loads no cluster, serving, training or storage stack."""

import subprocess
import sys

FORBIDDEN = ["ray", "vllm", "deepspeed", "prefect", "fsspec", "s3fs", "transformers", "pandas"]


def test_core_imports_no_cluster_stack():
    code = (
        "import sys, mappa.core.types, mappa.core.advantages, mappa.core.experiences, mappa.core.losses\n"
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"mappa.core imported {out.stdout.strip()}"
