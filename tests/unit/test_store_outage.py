"""An artifact store that stops answering (`mappa.storage.outage`): which errors count as an outage, how the
waits grow and when they stop (a fake clock: nothing sleeps), the one error past the budget, and what a
write cut short leaves. A real S3 endpoint that is down (moto's server, stopped) closes the file.

Not covered here: a run through an outage and its resume (tests/integration/test_s3_outage.py)."""

from __future__ import annotations

import pickle

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
    SSLError,
)

from mappa.storage.checkpoints import WRITTEN_LAST
from mappa.storage.outage import StoreOutage, StoreOutageError, adopt_outage, is_outage, ride_out
from mappa.storage.store import ArtifactStore

ENDPOINT = "http://s3.test:9000"


class FakeClock:
    """A clock that only sleeping moves; each call of the store costs `call_s`."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def client_error(status: int, code: str) -> ClientError:
    return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


def refused() -> EndpointConnectionError:
    return EndpointConnectionError(endpoint_url=f"{ENDPOINT}/mappa/runs/x")


def failing(times: int, error=refused, clock: FakeClock | None = None, call_s: float = 0.0):
    """A call that raises `error()` `times` times (each taking `call_s` on `clock`), then returns "done"."""
    calls = []

    def call() -> str:
        calls.append(1)
        if clock is not None:
            clock.now += call_s
        if len(calls) <= times:
            raise error()
        return "done"

    return call, calls


def outage(clock: FakeClock, lines: list[str]) -> StoreOutage:
    return StoreOutage(ENDPOINT, clock=clock, say=lines.append)


def test_what_counts_as_an_outage():
    translated = OSError(5, "Service Unavailable")  # s3fs turns a ClientError into an OSError, caused by it
    translated.__cause__ = client_error(503, "SlowDown")

    class RayTaskError(Exception):  # Ray hands a worker's error over as `.cause`
        cause = ConnectionClosedError(endpoint_url=ENDPOINT)

    outages = [
        refused(),
        ConnectionClosedError(endpoint_url=ENDPOINT),  # dropped inside a request
        ReadTimeoutError(endpoint_url=ENDPOINT),
        ConnectionRefusedError(111, "Connection refused"),
        TimeoutError(),
        client_error(502, "BadGateway"),
        client_error(500, "InternalError"),
        translated,
        RayTaskError(),
    ]
    assert all(is_outage(error) for error in outages), [e for e in outages if not is_outage(e)]
    waited = StoreOutageError("the artifact store ... did not answer")
    waited.__cause__ = refused()
    handled = FileNotFoundError("x")
    handled.__context__ = refused()  # raised while handling a connection error: not an outage itself
    lasting = [
        waited,  # already waited out: never waited for again
        handled,
        client_error(404, "NoSuchKey"),
        client_error(403, "AccessDenied"),
        NoCredentialsError(),
        SSLError(endpoint_url=ENDPOINT, error="certificate verify failed"),
        FileNotFoundError("x"),
        ValueError("bad"),
    ]
    assert not any(is_outage(error) for error in lasting), [e for e in lasting if is_outage(e)]


def test_an_outage_within_the_budget_is_waited_out_with_one_line_per_wait():
    clock, lines = FakeClock(), []
    call, calls = failing(6, clock=clock)
    clock_of_endpoint = outage(clock, lines)
    assert (
        ride_out(call, clock_of_endpoint, 600, "writing s3://mappa/runs/x", "s3://mappa/runs", clock.sleep)
        == "done"
    )
    assert clock.slept == [1, 2, 4, 8, 16, 30]  # doubling, at most 30 s apart
    assert len(calls) == 7 and len(lines) == 7  # a line per wait, and one when it answers again
    assert all(ENDPOINT in line for line in lines)
    assert "unreachable for 0 s" in lines[0] and "storage.outage_budget_s=600" in lines[0]
    assert lines[-1] == f"artifact store endpoint {ENDPOINT} answers again after 61 s"
    assert clock_of_endpoint.since is None and not clock_of_endpoint.given_up


def test_past_the_budget_one_error_names_the_store_the_endpoint_the_wait_and_the_fix():
    clock, lines = FakeClock(), []
    endpoint = outage(clock, lines)
    call, calls = failing(100, clock=clock, call_s=5.0)  # each try spends 5 s in botocore's own retries
    with pytest.raises(StoreOutageError) as raised:
        ride_out(call, endpoint, 60, "writing s3://mappa/runs/r/x.json", "s3://mappa/runs", clock.sleep)
    error = raised.value
    assert str(error) == (
        f"the artifact store s3://mappa/runs (endpoint {ENDPOINT}) did not answer for 61 s while writing "
        "s3://mappa/runs/r/x.json (EndpointConnectionError; storage.outage_budget_s=60). Check that the "
        "endpoint is up and reachable from this machine (AWS_ENDPOINT_URL, the network); --set "
        "storage.outage_budget_s=SECONDS waits longer"
    )
    assert isinstance(error.__cause__, EndpointConnectionError)
    assert error.waited_out and error.endpoint == ENDPOINT and error.waited_s == 61
    assert sum(clock.slept) <= 60 and clock.slept[-1] <= 30
    assert len(lines) == len(clock.slept)  # one line per wait, none for the give-up (the error says it)

    # the budget is spent for this process: the next call (a `failed` event, the CLI's look at the run)
    # tries once, whatever its own budget, until a call succeeds
    clock.slept.clear()
    again, tries = failing(100, clock=clock)
    with pytest.raises(StoreOutageError):
        ride_out(
            again, endpoint, 600, "reading s3://mappa/runs/r/config.yaml", "s3://mappa/runs", clock.sleep
        )
    assert len(tries) == 1 and clock.slept == []
    back, _ = failing(0)
    assert ride_out(back, endpoint, 600, "reading", "s3://mappa/runs", clock.sleep) == "done"
    assert not endpoint.given_up and endpoint.since is None


def test_other_errors_and_a_zero_budget_do_not_wait():
    clock, lines = FakeClock(), []
    denied, calls = failing(1, error=lambda: client_error(403, "AccessDenied"))
    with pytest.raises(ClientError):
        ride_out(denied, outage(clock, lines), 600, "writing", "s3://mappa/runs", clock.sleep)
    assert len(calls) == 1 and clock.slept == [] and lines == []
    with pytest.raises(StoreOutageError, match="did not answer for 0 s"):
        ride_out(failing(1)[0], outage(clock, lines), 0, "writing", "s3://mappa/runs", clock.sleep)
    assert clock.slept == [] and lines == []


def test_a_workers_outage_error_crosses_processes_and_the_driver_gives_up_too():
    error = StoreOutageError("the artifact store ... did not answer", "http://s3.adopt:1", 42.0)
    back = pickle.loads(pickle.dumps(error))  # how Ray carries a worker's error to the driver
    assert (str(back), back.endpoint, back.waited_s, back.waited_out) == (
        str(error),
        error.endpoint,
        42.0,
        True,
    )

    class RayTaskError(Exception):
        cause = back

    from mappa.storage.outage import outage_of

    adopt_outage(RayTaskError())
    assert outage_of("http://s3.adopt:1").given_up and outage_of("http://s3.adopt:1").down_s() >= 42


def test_a_checkpoint_copy_cut_short_never_looks_more_complete_than_it_is(tmp_path, monkeypatch):
    """`put_folder` writes WRITTEN_LAST after the rest: cut before the optimizer state, the checkpoint holds
    weights (and every other file), never a `trainer_state.pt` without them."""
    local = tmp_path / "ckpt"
    (local / "deepspeed").mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "trainer_state.pt", "deepspeed/a.pt"):
        (local / name).write_bytes(name.encode())
    store = ArtifactStore("memory://mappa-outage-test", outage_budget_s=0)
    written = []
    put_file = store.fs.put_file

    def put_until_the_marker(source, target, **kwargs):
        if target.endswith("trainer_state.pt"):
            raise ConnectionResetError(104, "Connection reset by peer")
        written.append(target.rsplit("ckpt/", 1)[1])
        return put_file(source, target, **kwargs)

    monkeypatch.setattr(store.fs, "put_file", put_until_the_marker)
    with pytest.raises(StoreOutageError, match=r"memory://.*writing memory://.*/trainer_state.pt"):
        store.put_folder(local, "run", "ckpt", last=WRITTEN_LAST)
    assert written[-1] == "model.safetensors" and len(written) == 4
    assert store.exists("run", "ckpt", "model.safetensors") and not store.exists(
        "run", "ckpt", "trainer_state.pt"
    )


def test_a_stopped_s3_endpoint_is_waited_for_then_named(monkeypatch, caplog, moto_server):
    """A real S3 endpoint (moto's server) that stops: a write waits the budget with a line per wait naming the
    endpoint, then one error; the pre-flight probe (`check_writable`) does not wait at all."""
    import boto3
    import s3fs

    from mappa.storage.outage import outage_of

    server, port = moto_server()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "unit",
        "AWS_SECRET_ACCESS_KEY": "unit",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",  # botocore's own retries would take 5-10 s per try
    }.items():
        monkeypatch.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        boto3.client("s3").create_bucket(Bucket="mappa")
        store = ArtifactStore("s3://mappa/runs", outage_budget_s=2.5)
        store.write_text("kept", "run", "a.txt")
        assert store.endpoint == endpoint
    finally:
        server.kill()
        server.wait()
    caplog.set_level("WARNING", logger="mappa.storage.outage")
    try:
        with pytest.raises(StoreOutageError) as raised:
            store.write_text("lost", "run", "b.txt")
        message = str(raised.value)
        assert f"the artifact store s3://mappa/runs (endpoint {endpoint}) did not answer for" in message
        assert "while writing s3://mappa/runs/run/b.txt (EndpointConnectionError" in message
        assert 2.5 <= raised.value.waited_s < 10
        waits = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
        assert len(waits) >= 2 and all(f"endpoint {endpoint} unreachable" in line for line in waits)
        assert store.given_up()
        outage_of(endpoint).answered()  # forget this outage: the probe must not wait by itself either
        with pytest.raises(ValueError, match="storage root s3://mappa/runs is not writable"):
            ArtifactStore("s3://mappa/runs", outage_budget_s=600).check_writable()
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
