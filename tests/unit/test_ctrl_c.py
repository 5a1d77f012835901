"""A Ctrl-C that pydantic's serializer swallows is still reported as an interrupt (exit code 130): the
CI's fault-injection run once pressed Ctrl-C while Prefect serialized a task result and got exit code 1."""

import argparse
import signal
import threading

import pydantic
import pytest
from pydantic_core import PydanticSerializationError

from mappa.cli import commands
from mappa.cli.ctrl_c import watching_ctrl_c


def press_ctrl_c() -> None:
    """SIGINT to this thread: delivered, and its handler run, before the call returns. (`os.kill` to the
    process may land on another thread, an xdist worker's I/O thread, and be handled only later: the test
    then failed now and then under load.)"""
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)


class Result(pydantic.BaseModel):
    value: int

    @pydantic.model_serializer
    def _ser_model(self):
        press_ctrl_c()  # Ctrl-C lands while pydantic serializes
        return {"value": self.value}


def test_pydantic_turns_a_ctrl_c_into_its_own_error_and_the_watch_still_sees_it():
    before = signal.getsignal(signal.SIGINT)
    with watching_ctrl_c() as ctrl_c:
        with pytest.raises(PydanticSerializationError, match="KeyboardInterrupt"):
            Result(value=1).model_dump()
    assert ctrl_c.pressed
    assert signal.getsignal(signal.SIGINT) is before


def test_a_plain_ctrl_c_still_raises_and_no_ctrl_c_is_not_seen():
    with watching_ctrl_c() as ctrl_c:
        pass
    assert not ctrl_c.pressed
    with pytest.raises(KeyboardInterrupt), watching_ctrl_c() as ctrl_c:
        press_ctrl_c()
    assert ctrl_c.pressed


def test_a_run_whose_ctrl_c_was_swallowed_ends_as_interrupted(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("mappa.flows.temporary_server.start_temporary_server", lambda: None)
    args = argparse.Namespace(command="train", debug=False)

    def flow():
        return Result(value=1).model_dump()

    code, result = commands.run_logged(args, "swallowed", str(tmp_path), config_stub(), flow)
    printed = capsys.readouterr().out
    assert (code, result) == (130, None)
    assert "interrupted:" in printed and "mappa resume swallowed" in printed and "error:" not in printed


def config_stub():
    env = argparse.Namespace(type="mathchat")
    return argparse.Namespace(env=env, name="ctrl-c")
