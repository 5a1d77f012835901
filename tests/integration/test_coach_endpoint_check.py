"""`mappa train` with an OpenAI-compatible coach asks the endpoint once before any work: an endpoint that
does not answer, refuses the key or does not serve the model stops the command in seconds, naming the fix."""

import time

from openai_test_server import CoachServer

from mappa.cli import main


def train(capsys, base_url: str, *extra: str) -> tuple[int, str]:
    started = time.monotonic()
    settings = [
        "coach.type=openai",
        "coach.scoring=generate",
        f"coach.base_url={base_url}",
        "coach.model=judge",
    ]
    args = [part for setting in settings for part in ("--set", setting)]
    code = main(["train", "configs/mathchat-cpu.yaml", *args, *extra])
    assert time.monotonic() - started < 30
    return code, " ".join(capsys.readouterr().out.split())


def test_a_coach_endpoint_that_is_down_refuses_the_key_or_lacks_the_model_stops_the_run(
    capsys, monkeypatch, tmp_path
):
    monkeypatch.setenv("MAPPA_TEST_KEY", "right")
    key = ("--set", "coach.api_key_env=MAPPA_TEST_KEY", "--set", f"storage.root={tmp_path}")
    with CoachServer() as server:
        server.state.models = ("other-model",)
        code, out = train(capsys, server.base_url, *key)
        assert code == 2 and "does not serve coach.model 'judge'; it serves: other-model" in out
        server.state.required_key = "not-this"
        code, out = train(capsys, server.base_url, *key)
        assert code == 2 and "refused the API key (HTTP 401)" in out and "$MAPPA_TEST_KEY" in out
        url = server.base_url
    code, out = train(capsys, url, *key)  # the server is gone
    assert code == 2 and "does not answer" in out and "coach.type=rubric" in out
    assert list(tmp_path.iterdir()) == []  # nothing was written
