"""The data a timeline embeds, recorded from a real operator on the real control plane: lanes, the
diff of a changed field, eventually's attempts, the failure marker, garbage collection, faults,
truncation, the size cap."""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from builders import configmap, configmap_ref

from ktest import faults
from ktest.cluster import Cluster
from ktest.operators import run_callable
from ktest.operators.logs import OperatorLog
from ktest.timeline import recording
from ktest.timeline.model import Event, TimelineData
from ktest.timeline.rendering import render
from ktest.wait import eventually

LABEL = "ktest.dev/scale"


def scaler(ctx: Any) -> None:
    """Sets ``data.replicas`` of each labelled ConfigMap to "3" and gives it a child; logs each step."""
    import logging

    log = logging.getLogger("scaler")
    cluster: Cluster = ctx.cluster
    done: set[str] = set()
    ctx.ready()
    while not ctx.stop.wait(0.05):
        for item in cluster.list("v1", "ConfigMap", namespace=ctx.namespaces[0], label_selector=LABEL):
            name = item["metadata"]["name"]
            if name in done or item["metadata"].get("deletionTimestamp"):
                continue
            try:
                cluster.patch(item, {"data": {"replicas": "3"}})
            except Exception as error:  # a conflict injected by the test: tried again next round
                log.info("patch of %s failed: %s", name, error)
                continue
            cluster.create(configmap(f"{name}-child", ctx.namespaces[0], {}, owner=item))
            log.info("scaled %s to 3", name)
            done.add(name)


def events(data: dict[str, Any], lane: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in data["events"]
        if (lane is None or e["lane"] == lane) and (kind is None or e["kind"] == kind)
    ]


@pytest.fixture
def recorded(admin: Cluster, ns: str) -> dict[str, Any]:
    """One recording: the scaler reconciles a ConfigMap past an injected conflict, the source is
    deleted (its child garbage-collected), then an eventually fails."""
    rec = recording(admin, test="scenario")
    with run_callable(scaler, admin, name="scaler", namespaces=[ns]) as op:  # noqa: SIM117
        with op.faults.inject(faults.conflict("configmaps", times=1)):
            with pytest.raises(AssertionError), rec:
                admin.create(configmap("web", ns, {"replicas": "1"}, labels={LABEL: "yes"}))
                eventually(lambda: admin.get(configmap_ref("web", ns))["data"]["replicas"] == "3", timeout=10)
                eventually(lambda: admin.exists(configmap_ref("web-child", ns)), timeout=10)
                admin.delete(configmap_ref("web", ns))
                eventually(lambda: not admin.exists(configmap_ref("web-child", ns)), timeout=20)
                eventually(lambda: admin.get_or_none(configmap_ref("web", ns)) == "never", timeout=0.3)
    return rec.data().as_json()


def test_lanes_are_the_test_each_operator_the_api_server_controllers_and_faults(
    recorded: dict[str, Any],
) -> None:
    assert [lane["id"] for lane in recorded["lanes"]] == [
        "test",
        "operator:scaler",
        "apiserver",
        "controllers",
        "faults",
    ]
    assert recorded["schema"] == 1 and recorded["test"] == "scenario" and recorded["outcome"] == "failed"
    operator_requests = events(recorded, "operator:scaler", "request")
    assert {"PATCH", "POST"} <= {e["detail"]["method"] for e in operator_requests}
    assert any(e["detail"]["code"] == 201 for e in operator_requests)
    assert any("scaled web to 3" in e["label"] for e in events(recorded, "operator:scaler", "log"))
    assert any(e["detail"]["method"] == "DELETE" for e in events(recorded, "test", "request"))


def test_a_changed_field_is_a_diff_between_two_resource_versions(recorded: dict[str, Any]) -> None:
    changes = [
        (e, row)
        for e in events(recorded, "apiserver", "watch-event")
        for row in e["detail"]["diff"]
        if row["path"] == "data.replicas" and e["detail"]["type"] == "MODIFIED"
    ]
    assert len(changes) == 1, changes
    event, row = changes[0]
    assert (row["old"], row["new"]) == ('"1"', '"3"')
    assert event["detail"]["object"] == f"configmaps {event['detail']['object'].split()[1]}"
    assert int(event["detail"]["previousResourceVersion"]) < int(event["detail"]["resourceVersion"])
    assert "metadata.managedFields" not in {r["path"].split("[")[0] for r in event["detail"]["diff"]}


def test_attempts_carry_their_verdict_and_value(recorded: dict[str, Any]) -> None:
    attempts = events(recorded, "test", "attempt")
    assert {"passed", "failed"} <= {a["detail"]["verdict"] for a in attempts}
    last = attempts[-1]
    assert last["detail"]["verdict"] == "failed" and last["detail"]["value"] == "False"
    assert all(0 <= a["t"] <= recorded["duration"] for a in attempts)


def test_the_failing_assertion_is_marked_where_it_failed(recorded: dict[str, Any]) -> None:
    (marker,) = events(recorded, "test", "assertion-failure")
    assert recorded["failure"]["message"].startswith("AssertionError: eventually(")
    assert "did not pass within 0.3s" in marker["label"]
    assert marker["t"] >= max(a["t"] for a in events(recorded, "test", "attempt"))


def test_each_write_is_in_the_api_servers_view_once(recorded: dict[str, Any]) -> None:
    seen = [
        (e["detail"]["object"], e["detail"]["resourceVersion"], e["detail"]["type"])
        for e in events(recorded, "apiserver", "watch-event")
    ]
    assert seen and len(seen) == len(set(seen)), f"a resource watched twice: {sorted(seen)}"


def test_garbage_collection_and_the_injected_fault_have_their_lanes(recorded: dict[str, Any]) -> None:
    collected = events(recorded, "controllers", "gc")
    assert any(
        e["detail"]["by"] == "garbage collector" and e["detail"]["object"].endswith("/web-child")
        for e in collected
    ), collected
    (fault,) = events(recorded, "faults", "fault")[:1]
    assert "conflict" in fault["label"] and fault["detail"]["code"] == 409
    assert any(e["detail"].get("code") == 409 for e in events(recorded, "operator:scaler", "request"))


def test_the_page_embeds_the_data_and_reaches_for_nothing_outside(
    admin: Cluster, recorded: dict[str, Any]
) -> None:
    from ktest.timeline.model import TimelineData

    rec = recording(admin, test="</script><script>alert(1)</script>")
    with rec:
        admin.rest.request("GET", "/version")
    page = render(rec.data())
    embedded = re.search(
        r'<script type="application/json" id="ktest-timeline-data">(.*?)</script>', page, re.S
    )
    assert embedded is not None
    assert json.loads(embedded.group(1))["test"] == "</script><script>alert(1)</script>"
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "http://" not in page.replace('content="', "") and "https://" not in page
    assert isinstance(rec.data(), TimelineData)


def test_an_interrupted_recording_says_where_it_stops(admin: Cluster, ns: str) -> None:
    rec = recording(admin, test="cut")
    with pytest.raises(KeyboardInterrupt), rec:
        admin.create(configmap("before", ns, {}))
        raise KeyboardInterrupt
    data = rec.data().as_json()
    assert data["outcome"] == "interrupted"
    assert data["truncated"]["reason"] == "interrupted by KeyboardInterrupt"
    assert 0 < data["truncated"]["at"] <= data["duration"]
    assert data["failure"] is None
    assert any(e["detail"].get("type") == "ADDED" for e in events(data, "apiserver", "watch-event"))


@pytest.mark.slow
def test_a_thousand_call_test_makes_a_page_under_two_megabytes(
    admin: Cluster, ns: str, tmp_path: Any
) -> None:
    go = threading.Event()

    def busy(ctx: Any) -> None:
        ctx.ready()
        go.wait()
        for index in range(1000):
            patch = {"data": {"n": str(index), "pad": "x" * 2000}}
            ctx.cluster.patch(configmap_ref("hot", ctx.namespaces[0]), patch)
        ctx.stop.wait()

    admin.create(configmap("hot", ns, {"n": "-1"}))
    with run_callable(busy, admin, name="busy", namespaces=[ns]) as op, recording(admin, test="1000") as rec:
        go.set()
        eventually(lambda: len(op.traffic.writes(name="hot")) >= 1000, timeout=120, interval=0.5)
    path = rec.write(tmp_path / "t.html")
    data = rec.data().as_json()
    assert len(events(data, "operator:busy", "request")) >= 1000
    assert len(events(data, "apiserver", "watch-event")) >= 1000
    assert path.stat().st_size <= 2 * 1024 * 1024, path.stat().st_size
    (pad,) = {
        row["new"]
        for e in events(data, "apiserver", "watch-event")
        for row in e["detail"]["diff"]
        if row["path"] == "data.pad"
    }
    assert len(pad) == 200 and pad.endswith("…")  # a 2,000-character value, cut


def test_a_watch_whose_connection_breaks_resumes_without_losing_a_write(admin: Cluster, ns: str) -> None:
    from ktest.timeline.watches import ResourceKey

    def added(rec: Any) -> list[str]:
        data = rec.data().as_json()
        return [
            e["detail"]["object"]
            for e in events(data, "apiserver", "watch-event")
            if e["detail"]["type"] == "ADDED"
        ]

    with recording(admin, test="broken connection") as rec:
        admin.create(configmap("first", ns, {}))
        eventually(lambda: added(rec) == [f"configmaps {ns}/first"], timeout=5)
        watch = rec._watches[ResourceKey("", "v1", "configmaps", ns)]
        watch._response.shutdown()  # the connection breaks, as in a network failure
        admin.create(configmap("second", ns, {}))
        eventually(lambda: len(added(rec)) == 2, timeout=5)
    assert added(rec) == [f"configmaps {ns}/first", f"configmaps {ns}/second"]
    data = rec.data().as_json()
    assert data["truncated"] is None and data["problems"] == []


def clock(at: float) -> str:
    """A log line's time as operators print it (HH:MM:SS.mmm, local time)."""
    return time.strftime("%H:%M:%S", time.localtime(at)) + f".{int(at % 1 * 1000):03d}"


def test_an_operators_lines_logged_before_the_recording_began_are_left_out(tmp_path: Path) -> None:
    log = OperatorLog("buffered", tmp_path)  # a session's operator, its output written out late
    log.write(f"{clock(time.time() - 120)} INFO an earlier test's line, written in time")
    rec = recording(test="log lines").start()
    log.write(f"{clock(time.time() - 60)} INFO an earlier test's line, written out only now")
    log.write(f"{clock(time.time())} INFO this test's line")
    log.write("a line without a time of its own")
    rec.stop()

    lines = [e["detail"]["line"] for e in events(rec.data().as_json(), "operator:buffered", "log")]
    assert len(lines) == 2, lines
    assert lines[0].endswith(" INFO this test's line") and lines[1] == "a line without a time of its own"


def test_a_watch_event_delivered_to_an_operator_has_the_type_of_the_write_it_follows() -> None:
    from ktest.timeline.assemble import Assembly

    def delivered(at: float, name: str) -> Event:
        detail = {"resource": "configmaps", "namespace": "ns", "name": name, "delivered_to": "op"}
        return Event("operator:op", "watch-event", at, f"watch event to op: configmaps ns/{name}", detail)

    def written(at: float, kind: str, name: str) -> Event:
        detail = {"type": kind, "resource": "configmaps", "object": f"configmaps ns/{name}"}
        return Event("apiserver", "watch-event", at, f"{kind} configmaps ns/{name}", detail)

    timeline = TimelineData("t", time.time())
    timeline.events = [
        written(1.0, "ADDED", "web"),
        delivered(1.01, "web"),
        written(2.0, "MODIFIED", "web"),
        delivered(2.02, "web"),
        delivered(2.5, "other"),  # the API server's view has no write of it
        written(3.0, "DELETED", "web"),
        delivered(2.99, "web"),  # timed a moment before the view's arrival: still that write's
        delivered(3.5, "replayed"),  # its write, replayed, is placed at its stamp: a second off
        written(4.2, "ADDED", "replayed"),
    ]
    Assembly.type_deliveries(timeline)

    types = [(e.t, e.detail["type"]) for e in timeline.events if e.lane == "operator:op"]
    assert types == [
        (1.01, "ADDED"),
        (2.02, "MODIFIED"),
        (2.5, "unknown (no write of it in the API server's view)"),
        (2.99, "DELETED"),
        (3.5, "ADDED"),
    ]
    assert timeline.events[3].label == "MODIFIED watch event to op: configmaps ns/web"


def test_a_replayed_deletion_without_a_deletion_timestamp_stays_where_it_arrived() -> None:
    from ktest.timeline.assemble import Assembly, Marks
    from ktest.timeline.watches import Seen

    started = time.monotonic()
    wall = time.time()
    written = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))  # created at the start
    obj = {"metadata": {"name": "c", "creationTimestamp": written, "managedFields": [{"time": written}]}}
    assembly = Assembly(started, wall, Marks())

    deleted = Seen(started + 6.0, "DELETED", obj, replayed=True)  # by the namespace controller, at +6 s
    assert assembly._when(deleted) == pytest.approx(6.0)
    modified = Seen(started + 6.0, "MODIFIED", obj, replayed=True)  # a replayed write: at its stamp
    assert assembly._when(modified) < 1.0


def test_a_page_built_after_the_end_keeps_only_what_came_before_it(admin: Cluster, ns: str) -> None:
    """The plugin ends a recording in the test's teardown and builds its page on another thread
    while the next test runs: an operator that outlives the test (session-scoped) goes on writing,
    or stops and drops its log, and neither may change the page."""
    begin, step = threading.Event(), threading.Event()

    def writer(ctx: Any) -> None:
        import logging

        ctx.ready()
        begin.wait(timeout=30)  # the recording has started: its "before" is part of the test
        ctx.cluster.create(configmap("before", ctx.namespaces[0], {}))
        logging.getLogger("writer").info("wrote before")
        step.wait()
        ctx.cluster.create(configmap("after", ctx.namespaces[0], {}))
        logging.getLogger("writer").info("wrote after")
        ctx.stop.wait()

    with run_callable(writer, admin, name="writer", namespaces=[ns]) as op:
        rec = recording(admin, test="ended").start()
        begin.set()
        eventually(lambda: admin.exists(configmap_ref("before", ns)), timeout=10)
        eventually(lambda: "wrote before" in op.logs, timeout=10)
        rec.end("passed")
        step.set()  # the next test's time: the operator writes on, then stops
        eventually(lambda: admin.exists(configmap_ref("after", ns)), timeout=10)
        eventually(lambda: "wrote after" in op.logs, timeout=10)
    rec.close()
    data = rec.data().as_json()
    requests = events(data, "operator:writer", "request")
    posted = [e["detail"]["path"] for e in requests if e["detail"]["method"] == "POST"]
    logged = [e["label"] for e in events(data, "operator:writer", "log")]
    views = events(data, "apiserver", "watch-event")
    added = [e["detail"]["object"] for e in views if e["detail"]["type"] == "ADDED"]
    assert len(posted) == 1 and posted[0].endswith("/configmaps"), posted
    assert any("wrote before" in line for line in logged), logged
    assert not any("wrote after" in line for line in logged), logged
    assert f"configmaps {ns}/before" in added and f"configmaps {ns}/after" not in added, added


def test_a_watchs_events_keep_their_order_when_one_is_placed_by_its_stamp() -> None:
    """A resumed stream's first events are placed by their whole-second stamps (they came late);
    one placed by its arrival just before must not be drawn after them (CI once saw the two
    ConfigMaps of the broken-connection test in the other order)."""
    from ktest.timeline.assemble import Assembly, Marks
    from ktest.timeline.watches import ResourceKey, Seen

    started = time.monotonic()
    wall = float(int(time.time())) + 0.3  # the recording began 0.3 s into a second
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))

    def created(name: str, version: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "ns", "resourceVersion": version, "creationTimestamp": stamp}
        meta["managedFields"] = [{"time": stamp}]
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}

    key = ResourceKey("", "v1", "configmaps", "ns")
    first = Seen(started + 0.5, "ADDED", created("first", "10"), replayed=False)  # live, at +0.5 s
    second = Seen(started + 1.6, "ADDED", created("second", "11"), replayed=True)  # after a resume
    assembly = Assembly(started, wall, Marks())
    assert assembly._when(second) < assembly._when(first)  # alone, its stamp puts it first
    timeline = TimelineData("t", wall)
    assembly.add_api_view(timeline, [(key, second), (key, first)], [], set(), {"ns"}, set())
    views = [event for event in timeline.events if event.lane == "apiserver"]
    assert [event.detail["object"] for event in sorted(views, key=lambda event: event.t)] == [
        "configmaps ns/first",
        "configmaps ns/second",
    ]


def test_an_event_goes_to_the_lane_of_the_component_that_reported_it() -> None:
    """The scheduler's and KWOK's Events keep their lanes whatever the operators are called (CI once
    found the scheduler's lane empty); an operator's go to the operator its component names."""
    from ktest.timeline.assemble import Assembly, Marks
    from ktest.timeline.watches import ResourceKey, Seen

    started, wall = time.monotonic(), time.time()

    def event(name: str, component: str, reason: str) -> Seen:
        meta = {"name": name, "namespace": "ns", "resourceVersion": str(len(name))}
        obj = {"metadata": meta, "reason": reason, "source": {"component": component},
               "involvedObject": {"kind": "Pod", "name": "web"}}
        return Seen(started + 0.1, "ADDED", obj, replayed=False)

    seen = [event("a", "default-scheduler", "Scheduled"), event("bb", "kwok_controller", "BackOff"),
            event("ccc", "memcached-controller", "Sized"), event("dddd", "kopf", "Logging"),
            event("eeeee", "deployment-controller", "ScalingReplicaSet")]
    timeline = TimelineData("t", wall)
    operators = ["scheduler", "kwok", "mem", "memcached"]
    key = ResourceKey("", "v1", "events", "ns")
    assembly = Assembly(started, wall, Marks())
    assembly.add_api_view(timeline, [(key, one) for one in seen], operators, set(), {"ns"}, set())
    lanes = {e.detail["reason"]: e.lane for e in timeline.events if e.kind == "k8s-event"}
    assert lanes == {
        "Scheduled": "kube-scheduler",
        "BackOff": "simulated-kubelet",
        "Sized": "operator:memcached",
        "Logging": "operator:memcached",
        "ScalingReplicaSet": "controllers",
    }


def test_an_operators_reads_in_a_namespace_the_test_leaves_alone_open_no_watch_until_it_writes_there(
    admin: Cluster, ns: str
) -> None:
    """A session operator reads in every earlier test's namespace: those reads alone must not make
    each test's recording watch them all (thousands of watches over a suite); a write there does."""
    recorded, write = threading.Event(), threading.Event()
    mark = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mark"}}

    def elsewhere(ctx: Any) -> None:
        ctx.ready()
        reads = 0
        while not ctx.stop.wait(0.05):
            ctx.cluster.list("v1", "ConfigMap", namespace=ctx.namespaces[0])
            reads += recorded.is_set()
            if reads == 3:  # a write here after three recorded reads elsewhere: once it is watched,
                ctx.cluster.create(mark, namespace=ns)  # the recording has looked at those reads
            if write.is_set() and not ctx.cluster.exists(configmap_ref("written", ctx.namespaces[0])):
                ctx.cluster.create(configmap("written", ctx.namespaces[0], {}))

    with admin.namespace(prefix="elsewhere", background=True) as other:  # noqa: SIM117
        with run_callable(elsewhere, admin, name="elsewhere", namespaces=[other]):
            with recording(admin, test="elsewhere") as rec:
                recorded.set()
                admin.create(configmap("here", ns, {}))
                eventually(lambda: f"secrets in {ns}" in rec.watched, timeout=10)
                assert f"configmaps in {other}" not in rec.watched, rec.watched
                assert f"configmaps in {ns}" in rec.watched, rec.watched
                write.set()
                eventually(lambda: f"configmaps in {other}" in rec.watched, timeout=10)
            added = [
                e["detail"]["object"]
                for e in events(rec.data().as_json(), "apiserver", "watch-event")
                if e["detail"]["type"] == "ADDED"
            ]
    assert f"configmaps {other}/written" in added and f"configmaps {ns}/here" in added, added


def test_ktests_sweep_of_a_namespace_opens_no_watch_for_each_kind_it_lists(admin: Cluster, ns: str) -> None:
    """finalize_namespace lists every kind in the namespace (some forty): the recording shows those
    requests but watches only what the test wrote."""
    from ktest.operators.pytest_fixtures import finalize_namespace

    with recording(admin, test="sweep") as rec:
        admin.create(configmap("kept", ns, {}))
        finalize_namespace(admin, ns)
    assert rec.watched == [f"configmaps in {ns}", f"events in {ns}"], rec.watched
    lists = [e for e in events(rec.data().as_json(), "test", "request") if e["detail"]["method"] == "GET"]
    assert len(lists) > 10, lists
