"""harness.ray_lanes / `tritondiff fuzz --ray`: lanes as Ray actors on a multi-node cluster started here (head plus
worker nodes on this machine), the store kept by the driver; node loss and a killed driver lose no finding.

The cluster tests need Ray (``pip install 'tritondiff[ray]'``) and take a minute each: they are ``slow`` (the
nightly tier).  The rest run everywhere."""
from __future__ import annotations

import io
import json
import os
import signal
import sys
import threading
import time

import pytest

from tests.harness.test_campaign import PLANTED, _assert_kept, _committed, _findings, _Fuzz
from tritondiff.harness.campaign import run_campaign
from tritondiff.harness.cli import main
from tritondiff.harness.exc import UsageError
from tritondiff.harness.ray_lanes import pack, unpack
from tritondiff.harness.store import Store


@pytest.fixture
def planted(tmp_path):
    path = tmp_path / "planted_subjects.py"
    path.write_text(PLANTED)
    return str(path)


# ---------------------------------------------------------------------------------------------- everywhere

def test_a_dump_survives_the_trip_from_an_actor(tmp_path):
    src = tmp_path / "d"
    (src / "inputs").mkdir(parents=True)
    (src / "summary.json").write_text('{"signature": "s"}')
    (src / "inputs" / "x.pt").write_bytes(bytes(range(256)))
    folder = unpack(pack(str(src)), str(tmp_path / "there"))
    assert json.loads(open(os.path.join(folder, "summary.json")).read()) == {"signature": "s"}
    assert open(os.path.join(folder, "inputs", "x.pt"), "rb").read() == bytes(range(256))
    assert pack(None) is None


def test_ray_without_the_extra_is_one_clear_line(planted, monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)            # import ray raises ImportError
    assert main(["fuzz", planted, "--ray", "auto", "--budget", "5", "--store", str(tmp_path / "f.db")]) == 2
    err = capsys.readouterr().err
    assert "pip install 'tritondiff[ray]'" in err and "Traceback" not in err


@pytest.mark.parametrize("address, fragment", [("127.0.0.1:1", "nothing answers there"),
                                               ("ray://127.0.0.1:1", "nothing answers there"),
                                               ("no-port", "not an address"), ("host:abc", "not an address")])
def test_an_address_nobody_answers_at_is_one_line_at_once(planted, tmp_path, capsys, address, fragment):
    """Ray itself retries such an address for minutes: the driver checks it first."""
    pytest.importorskip("ray")
    t0 = time.monotonic()
    assert main(["fuzz", planted, "--ray", address, "--budget", "5", "--store", str(tmp_path / "f.db")]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err and time.monotonic() - t0 < 30


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(ray=""), "give a Ray cluster address"),
    (dict(ray=3), "give a Ray cluster address"),
    (dict(ray="auto", huge=True), "run it without --ray"),
])
def test_bad_ray_arguments_raise_usage_errors(planted, tmp_path, kwargs, fragment):
    with pytest.raises(UsageError, match=fragment):
        run_campaign([planted], budget_s=5, store=str(tmp_path / "f.db"), out=io.StringIO(), **kwargs)


# ---------------------------------------------------------------------------------------------- on a cluster

@pytest.fixture
def cluster():
    """A Ray cluster on this machine: a head that runs no actor (0 CPUs) and two worker nodes of one CPU each."""
    pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    c.worker_nodes_added = [c.add_node(num_cpus=1), c.add_node(num_cpus=1)]
    c.wait_for_nodes()
    try:
        yield c
    finally:
        import ray
        ray.shutdown()
        c.shutdown()


@pytest.mark.slow
def test_lanes_on_worker_nodes_find_every_planted_bug(planted, tmp_path, cluster):
    store = str(tmp_path / "out" / "f.db")
    out = io.StringIO()
    res = run_campaign([planted], budget_s=25.0, workers=2, seed=3, store=store, example_timeout_s=2.0, out=out,
                       ray=cluster.address)
    log = out.getvalue()
    assert res.status == "done" and not res.errors, log
    assert "2 Ray actor(s) on the cluster" in log
    found = _findings(store)
    classes = {f["subject"]: f["failure_class"] for f in found.values()}
    assert classes == {"segfaults": "crash", "hangs": "hang", "wrong_tail": "mismatch"}, log
    tail = next(f for f in found.values() if f["subject"] == "wrong_tail")
    assert tail["state"] == "minimal" and tail["case"]["dims"]["N"] == 4        # shrunk on the actor, shipped
    for f in found.values():                           # every dump came back whole, into the driver's folder
        with open(os.path.join(f["dump"], "summary.json")) as fh:
            assert json.load(fh)["signature"] == f["signature"]
        assert os.path.dirname(os.path.dirname(f["dump"])) == str(tmp_path / "out" / "f-dumps")
    with Store(store, create=False) as s:
        stats = {r["subject"]: r for r in s.stats()}
        (camp,) = s.campaigns()
        assert all(t.status == "done" for t in s.tasks(camp.id))
    assert stats["doubles"]["examples"] > 10
    assert res.examples == sum(r["examples"] for r in stats.values())
    assert res.exit_code == 1


@pytest.mark.slow
def test_a_lost_node_requeues_its_task_on_a_new_actor(planted, tmp_path, cluster):
    store = str(tmp_path / "f.db")
    out = io.StringIO()
    done: dict = {}

    def campaign():
        done["result"] = run_campaign([f"{planted}::wrong_tail", f"{planted}::doubles"], budget_s=40.0, workers=2,
                                      seed=5, store=store, example_timeout_s=2.0, out=out, ray=cluster.address)

    thread = threading.Thread(target=campaign)
    thread.start()
    deadline = time.monotonic() + 240
    while not ("start L0" in out.getvalue() and "start L1" in out.getvalue()):     # both actors placed, exploring
        assert time.monotonic() < deadline and thread.is_alive(), out.getvalue()
        time.sleep(0.2)
    spare = cluster.add_node(num_cpus=1)              # somewhere for the lost lane's next actor to go
    cluster.remove_node(cluster.worker_nodes_added[0])  # kills the node: its raylet, its actor, its worker
    thread.join(300)
    assert not thread.is_alive(), out.getvalue()
    log = out.getvalue()
    res = done["result"]
    assert "lost  L" in log and "queued again" in log, log
    assert res.status == "done" and not res.errors, log
    assert {f["subject"]: f["failure_class"] for f in _findings(store).values()} == {"wrong_tail": "mismatch"}, log
    with Store(store, create=False) as s:
        (camp,) = s.campaigns()
        assert all(t.status == "done" for t in s.tasks(camp.id)), log
    assert spare is not None


@pytest.mark.slow
def test_a_killed_driver_loses_no_finding_and_resumes(planted, tmp_path, cluster):
    store = str(tmp_path / "f.db")
    args = ["--budget", "20", "--workers", "2", "--seed", "9", "--store", store, "--ray", cluster.address]
    fuzz = _Fuzz(tmp_path, f"{planted}::wrong_tail", f"{planted}::doubles", *args)
    fuzz.wait_for(lambda: _committed(store), "a committed finding")
    fuzz.proc.send_signal(signal.SIGKILL)
    fuzz.wait(60)
    committed = _findings(store)
    assert committed and {f["subject"] for f in committed.values()} == {"wrong_tail"}
    fuzz = _Fuzz(tmp_path, "--resume", "--store", store, "--ray", cluster.address)
    assert fuzz.wait(300) == 1, fuzz.output()          # the campaign found wrong_tail
    _assert_kept(store, committed)                     # kept, or superseded by the shrunk form
    tail = [f for f in _findings(store).values() if f["subject"] == "wrong_tail"]
    assert len(tail) == 1 and tail[0]["state"] == "minimal", fuzz.output()
    with Store(store, create=False) as s:
        (camp,) = s.campaigns()
        assert camp.status == "done" and all(t.status == "done" for t in s.tasks(camp.id))
