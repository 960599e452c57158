"""Fault plans users write (``fedemu run --faults PLAN``), role picks, dup faults and failure processes."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.faults import Fault, plan
from fedemu.fabric.journal import FAULT, JournalReader
from fedemu.model import US_PER_S
from fedemu.scenarios import fault_plan as fp
from fedemu.tools.cli import main

from fabric_helpers import by_code, read_journal

NAMES = ["gm-0", "gm-1", "gm-2", "lm-0", "lm-1", "lm-2", "lm-3", *(f"w-{i}" for i in range(40)), "submitter"]
JOBS = ["--set", "jobs=40"]


def parse(text, json_format=False):
    return fp.parse(text, "plan.toml", json_format=json_format)


# ---- reading plans -------------------------------------------------------------------------------
def test_a_plan_with_every_kind_gives_the_events_it_says():
    p = parse("""
[[fault]]
at_s = 1.5
kind = "crash"
target = ["w-3", "gm-1"]
for_s = 0.25
[[fault]]
at_s = 2
kind = "partition"
sides = ["gm-0", ["lm-0", "lm-1"]]
for_s = 1
[[fault]]
at_s = 3
kind = "slow"
link = ["gm-2", "lm-3"]
value = 4.0
for_s = 0.5
[[fault]]
at_s = 4
kind = "loss"
link = "*"
value = 0.25
[[fault]]
at_s = 5
kind = "loss"
link = ["w-0", "lm-0"]
value = 0.5
[[fault]]
at_s = 6
kind = "heal"
[[fault]]
at_s = 7
kind = "restore"
link = "*"
[[fault]]
at_s = 0.000001
kind = "restart"
target = "w-3"
""")
    s = US_PER_S
    assert p.faults(NAMES, 1) == plan([
        (3 * s // 2, "crash", "w-3"), (3 * s // 2, "crash", "gm-1"),
        (7 * s // 4, "restart", "w-3"), (7 * s // 4, "restart", "gm-1"),
        (2 * s, "partition", (("gm-0",), ("lm-0", "lm-1"))), (3 * s, "heal", ()),
        (3 * s, "slow", ("gm-2", "lm-3"), 4.0), (7 * s // 2, "restore", ("gm-2", "lm-3")),
        (4 * s, "loss", "*", 0.25), (5 * s, "loss", ("w-0", "lm-0"), 0.5), (6 * s, "heal", ()),
        (7 * s, "restore", "*"), (1, "restart", "w-3")])


def test_json_plans_are_read_by_extension(tmp_path):
    events = [{"at_s": 1, "kind": "crash", "target": {"role": "worker", "count": 2}}]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(events))
    as_list = fp.load(path)
    path.write_text(json.dumps({"fault": events}))
    assert as_list.faults(NAMES, 3) == fp.load(path).faults(NAMES, 3)
    assert [f.kind for f in as_list.faults(NAMES, 3)] == ["crash", "crash"]


BAD = [
    ('[[fault]]\nat_s = 1\nkind = "explode"\ntarget = "w-1"',
     "plan.toml:1: fault 1: unknown kind 'explode'; known: crash, restart, partition, heal, slow, restore, loss"),
    ('[[fault]]\nkind = "crash"\ntarget = "w-1"', r"plan.toml:1: fault 1 \(crash\): needs at_s, the time in seconds"),
    ('[[fault]]\nat_s = -1\nkind = "crash"\ntarget = "w-1"',
     r"plan.toml:1: fault 1 \(crash at -1 s\): at_s must be a number of seconds >= 0, got -1"),
    ('[[fault]]\nat_s = "soon"\nkind = "crash"\ntarget = "w-1"', "at_s must be a number of seconds >= 0, got 'soon'"),
    ('[[fault]]\nat_s = nan\nkind = "crash"\ntarget = "w-1"', "at_s must be a number of seconds >= 0, got nan"),
    ('[[fault]]\nat_s = 1\nkind = "crash"', r"plan.toml:1: fault 1 \(crash at 1 s\): needs target"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\nlink = ["a", "b"]',
     r"unexpected key\(s\) link; crash takes at_s, for_s, kind, target"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = {role = "robot"}',
     "unknown role 'robot'; known: worker, gm, lm, master, dist, sparrow, hawk, hawk-long, eagle, eagle-long, manager"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = {role = "worker", count = 0}',
     'count must be a whole number >= 1 or "all", got 0'),
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = {role = "worker", size = 2}', "takes role and count, not size"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = []', "an empty target names no actor"),
    ('[[fault]]\nat_s = 1\nkind = "slow"\nlink = ["gm-0", "lm-0"]', "needs value, the latency factor"),
    ('[[fault]]\nat_s = 1\nkind = "slow"\nlink = ["gm-0", "lm-0"]\nvalue = 0',
     "fault slow needs a latency factor > 0, got 0"),
    ('[[fault]]\nat_s = 1\nkind = "slow"\nlink = "*"\nvalue = 2', r"'\*' is only for loss and restore"),
    ('[[fault]]\nat_s = 1\nkind = "slow"\nlink = ["gm-0"]\nvalue = 2', "link must be two actors"),
    ('[[fault]]\nat_s = 1\nkind = "slow"\nlink = [{role = "lm", count = 2}, "gm-0"]\nvalue = 2',
     "each end of a link is one actor"),
    ('[[fault]]\nat_s = 1\nkind = "loss"\nlink = "*"\nvalue = 1.5', r"fault loss needs a probability in \[0, 1\], got 1.5"),
    ('[[fault]]\nat_s = 1\nkind = "dup"\nlink = "*"\nvalue = 0.5',
     r"fault 1: kind 'dup': dup is retired: messages travel on connections \(TCP\), which never deliver one twice; "
     r"model a lossy link with loss"),
    ('[[fault]]\nat_s = 1\nkind = "loss"\nlink = "*"\nvalue = "high"', "value must be a finite number, got 'high'"),
    ('[[fault]]\nat_s = 1\nkind = "loss"\nlink = "*"\nvalue = 0.1\nfor_s = 2', r"unexpected key\(s\) for_s"),
    ('[[fault]]\nat_s = 1\nkind = "heal"\ntarget = "w-1"', r"unexpected key\(s\) target; heal takes at_s, kind"),
    ('[[fault]]\nat_s = 1\nkind = "partition"\nsides = ["gm-0"]', "sides must be two groups of actors"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "w-1"\n[[fault]]\nat_s = 2\nkind = "crash"\ntarget = 5',
     r"plan.toml:5: fault 2 \(crash at 2 s\): a target is an actor name"),
    ('[[fault]\nat_s = 1', "plan.toml: not valid TOML: .*line 1"),
    ('seed = 3', r"plan.toml: a plan holds only \[\[fault\]\] tables .*found \['seed'\]"),
    ('fault = 3', "'fault' must be a list of tables"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_bad_plans_are_one_line_errors_naming_file_and_entry(text, message):
    with pytest.raises(ConfigError, match=message) as info:
        parse(text)
    assert "\n" not in str(info.value) and str(info.value).startswith("plan.toml")


@pytest.mark.parametrize("target, message", [
    ('"w-99"', r"plan.toml:1: fault 1 \(crash at 1 s\): unknown actor 'w-99'; known: gm-0, gm-1"),
    ('{role = "master"}', "no actor has role 'master' in this run; roles here: gm, lm, manager, worker"),
    ('{role = "lm", count = 5}', "count 5 is more than the 4 actors of role 'lm'"),
])
def test_names_and_roles_are_checked_against_the_run(target, message):
    p = parse(f'[[fault]]\nat_s = 1\nkind = "crash"\ntarget = {target}')
    with pytest.raises(ConfigError, match=message):
        p.faults(NAMES, 1)


def test_bad_json_names_its_line(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('[\n{"at_s": 1,\n "kind": }]')
    with pytest.raises(ConfigError, match=r"p.json:3: not valid JSON"):
        fp.load(path)
    with pytest.raises(ConfigError, match=r"nope.toml: no such file"):
        fp.load(tmp_path / "nope.toml")


def test_a_float_time_in_microseconds_is_refused_not_truncated():
    with pytest.raises(ConfigError, match="fault crash at 1.5: the time must be whole microseconds"):
        Fault(1.5, "crash", "a")
    with pytest.raises(ConfigError, match="got float"):
        plan([(1000.0, "crash", "a")])
    with pytest.raises(ConfigError, match="got bool"):
        Fault(True, "crash", "a")


# ---- role picks ----------------------------------------------------------------------------------
def test_role_members_follow_name_prefixes():
    names = ["gm-0", "lm-0", "lm-0-standby", "w-1", "w-10", "wx-1", "master-2", "dist-0", "sparrow-1", "submitter"]
    assert fp.members(names, "worker") == ["w-1", "w-10"]
    assert fp.members(names, "lm") == ["lm-0"]
    assert fp.members(names, "manager") == ["gm-0", "lm-0", "master-2", "dist-0", "sparrow-1"]


PICK = '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = {role = "worker", count = 5}\nfor_s = 1'


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**64 - 1))
def test_role_choice_is_deterministic_distinct_and_of_the_role(seed):
    p = parse(PICK)
    first = p.faults(NAMES, seed)
    assert first == p.faults(NAMES, seed) == parse(PICK).faults(list(NAMES), seed)
    crashed = [f.target[0] for f in first if f.kind == "crash"]
    assert len(set(crashed)) == 5 and all(n.startswith("w-") for n in crashed)
    assert [f.target[0] for f in first if f.kind == "restart"] == crashed  # for_s restarts the same actors


def test_role_choice_depends_on_the_seed_and_count_all_takes_every_actor():
    p = parse(PICK)
    picks = {tuple(f.target for f in p.faults(NAMES, seed)) for seed in range(20)}
    assert len(picks) >= 15
    every = parse('[[fault]]\nat_s = 1\nkind = "partition"\nsides = [{role = "gm", count = "all"}, '
                  '{role = "lm", count = "all"}]').faults(NAMES, 7)
    assert every == [Fault(US_PER_S, "partition", (("gm-0", "gm-1", "gm-2"), ("lm-0", "lm-1", "lm-2", "lm-3")))]


# ---- failure processes ---------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32), st.floats(0.5, 50), st.floats(0, 5))
def test_failure_processes_are_deterministic_alternating_and_bounded(seed, mtbf, mttr):
    horizon = 20 * US_PER_S
    events = fp.failure_process(NAMES, seed, "worker", mtbf, mttr, horizon)
    assert events == fp.failure_process(NAMES, seed, "worker", mtbf, mttr, horizon)
    for name in fp.members(NAMES, "worker"):
        mine = [f for f in events if f.target == (name,)]
        kinds = [f.kind for f in mine]
        assert kinds == (["crash", "restart"] * len(kinds))[: len(kinds)]
        assert all(a.at_us < b.at_us for a, b in zip(mine, mine[1:]))
        assert all(f.at_us < horizon for f in mine if f.kind == "crash")
        if mttr == 0:
            assert kinds in ([], ["crash"])
    # each actor has its own stream: a run with fewer workers keeps the others' failures
    fewer = [n for n in NAMES if n != "w-0"]
    assert fp.failure_process(fewer, seed, "worker", mtbf, mttr, horizon) == \
        [f for f in events if f.target != ("w-0",)]


def test_failure_processes_depend_on_the_seed_and_refuse_absurd_rates():
    a = fp.failure_process(NAMES, 1, "manager", 5.0, 1.0, 60 * US_PER_S)
    b = fp.failure_process(NAMES, 2, "manager", 5.0, 1.0, 60 * US_PER_S)
    assert a and b and a != b
    assert {f.target[0] for f in a} <= set(fp.members(NAMES, "manager"))
    assert fp.failure_process(NAMES, 1, "worker", 0.0, 1.0, 60 * US_PER_S) == []
    with pytest.raises(ConfigError, match="worker_mtbf_s=1e-06 .* would make about"):
        fp.failure_process(NAMES, 1, "worker", 1e-6, 0.0, 60 * US_PER_S)


# ---- end to end ----------------------------------------------------------------------------------
def _journal_header(path):
    reader = JournalReader(path)
    try:
        return reader.header
    finally:
        reader.close()


def test_a_worker_crash_plan_ends_with_a_violation_that_replays_identical(tmp_path, capsys):
    """Every GM crashed for good leaves no front end to finish the jobs: the verdict is exit 1, and
    replay --verify re-runs the plan from the header alone (the plan file is gone by then)."""
    plan_file = tmp_path / "crash.toml"
    plan_file.write_text('[[fault]]\nat_s = 1.0\nkind = "crash"\ntarget = {role = "gm", count = 3}\n')
    journal = tmp_path / "j.fjl"
    code = main(["run", "default", "--quiet", *JOBS, "--faults", str(plan_file), "--journal", str(journal),
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 1 and err.startswith("fedemu: violation: jobs_closed: ") and err.count("\n") == 1, err
    header = _journal_header(journal)
    assert header["fault_plan"] == str(plan_file)
    assert [f[1] for f in header["faults"]] == ["crash"] * 3
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["invariants"]["jobs_closed"] != "ok"
    plan_file.unlink()
    assert main(["replay", str(journal), "--verify"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("identical: ") and "violation: jobs_closed" in out


def test_a_slow_then_restore_plan_still_ends_ok(tmp_path, capsys):
    plan_file = tmp_path / "slow.toml"
    plan_file.write_text('[[fault]]\nat_s = 0.5\nkind = "slow"\nlink = ["gm-0", "lm-1"]\nvalue = 5\n'
                         '[[fault]]\nat_s = 1.5\nkind = "restore"\nlink = ["gm-0", "lm-1"]\n')
    journal = tmp_path / "j.fjl"
    assert main(["run", "default", "--quiet", *JOBS, "--faults", str(plan_file), "--journal", str(journal)]) == 0
    assert [r[3] for r in by_code(read_journal(journal)[1], FAULT)] == ["slow", "restore"]
    capsys.readouterr()
    assert main(["replay", str(journal), "--verify"]) == 0


@pytest.mark.parametrize("plan_text, says", [
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "w-9999"\n', "fault 1 (crash at 1 s): unknown actor 'w-9999'"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\ntarget = {role = "master"}\n', "no actor has role 'master'"),
    ('[[fault]]\nat_s = 1\nkind = "crash"\n', "fault 1 (crash at 1 s): needs target"),
])
def test_bad_plans_on_the_command_line_are_exit_2_and_leave_nothing(tmp_path, capsys, plan_text, says):
    plan_file = tmp_path / "bad.toml"
    plan_file.write_text(plan_text)
    out = tmp_path / "o"
    code = main(["run", "default", "--quiet", *JOBS, "--faults", str(plan_file), "--out", str(out),
                 "--journal", str(tmp_path / "j.fjl")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"fedemu: error: {plan_file}:1: ") and says in err and err.count("\n") == 1
    assert not (tmp_path / "j.fjl").exists()


def test_failure_process_keys_add_journaled_faults_that_replay(tmp_path, capsys):
    journal = tmp_path / "j.fjl"
    code = main(["run", "default", "--quiet", *JOBS, "--set", "worker_mtbf_s=30", "--set", "worker_mttr_s=0.5",
                 "--journal", str(journal)])
    capsys.readouterr()
    assert code in (0, 1)
    kinds = [r[3] for r in by_code(read_journal(journal)[1], FAULT)]
    assert kinds.count("crash") >= 5 and kinds.count("restart") >= 1
    assert main(["replay", str(journal), "--verify"]) == 0


@pytest.mark.parametrize("key, value", [("worker_mtbf_s", "-1"), ("manager_mttr_s", "nan"), ("dup", "2"),
                                        ("fault_horizon_s", "x")])
def test_failure_process_keys_refuse_bad_values(capsys, key, value):
    code = main(["run", "default", "--quiet", *JOBS, "--set", f"{key}={value}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fedemu: error: ") and err.count("\n") == 1, err


# ---- any input: a plan or one line ---------------------------------------------------------------
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**25), st.floats(allow_nan=True),
                     st.sampled_from(["w-1", "gm-0", "lm-9", "*", "", "all", "x"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["role", "count", "size"]), inner, max_size=3),
    st.fixed_dictionaries({"role": st.sampled_from([*fp.ROLES, "robot"]), "count": st.one_of(
        st.integers(-1, 60), st.just("all"))})), max_leaves=6)
_names = st.sampled_from(["w-1", "w-2", "gm-0", "lm-3", "lm-9", "submitter"])
_picks = st.fixed_dictionaries({"role": st.sampled_from([*fp.ROLES, "robot"])},
                               optional={"count": st.one_of(st.integers(-1, 60), st.just("all"))})
_targets = st.one_of(_names, _picks, st.lists(st.one_of(_names, _picks), max_size=3), _values)
_KEYS = {"crash": ("target",), "restart": ("target",), "partition": ("sides",), "heal": (),
         "slow": ("link", "value"), "restore": ("link",), "loss": ("link", "value"), "dup": ("link", "value")}
_GOOD = {"target": _targets, "sides": st.lists(_targets, min_size=2, max_size=2),
         "link": st.one_of(st.just("*"), st.lists(st.one_of(_names, _picks), min_size=2, max_size=2)),
         "value": st.floats(0, 2), "for_s": st.floats(0, 10), "at_s": st.floats(0, 100)}


@st.composite
def _entries(draw):
    """Mostly well-formed entries of each kind, some with a key dropped, added or given any value."""
    kind = draw(st.sampled_from([*_KEYS, "x"]))
    keys = ["at_s", *_KEYS.get(kind, ()), *(["for_s"] if kind in fp.ENDS_WITH and draw(st.booleans()) else [])]
    entry = {"kind": kind, **{k: draw(_GOOD[k]) for k in keys}}
    for _ in range(draw(st.integers(0, 2))):
        key = draw(st.sampled_from([*_GOOD, "kind", "extra"]))
        if draw(st.booleans()):
            entry.pop(key, None)
        else:
            entry[key] = draw(_values)
    return entry


@settings(max_examples=300, deadline=None)
@given(st.lists(_entries(), max_size=4), st.integers(0, 2**64 - 1))
def test_any_json_plan_is_a_plan_of_checked_faults_or_one_line_error(events, seed):
    """Whatever the file holds, reading it and resolving it against a run give valid Faults or one
    ConfigError line naming the file; never another exception."""
    try:
        faults = parse(json.dumps(events), json_format=True).faults(NAMES, seed)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("plan.toml")
        return
    assert all(isinstance(f, Fault) and 0 <= f.at_us < 2**63 for f in faults)
    assert all(name in NAMES for f in faults for name in f.names())
    assert plan([f.as_data() for f in faults]) == faults


def test_the_documented_example_plan_reads_and_resolves():
    from pathlib import Path

    p = fp.load(Path(__file__).resolve().parent.parent / "docs" / "fault-plan-example.toml")
    assert [f.kind for f in p.faults(NAMES, 1)] == ["crash"] * 3 + ["restart"] * 3 + [
        "partition", "heal", "slow", "restore", "loss", "loss"]


@pytest.mark.parametrize("plan_name, scheduler, counter", [
    ("failover-plan.toml", "megha", "gm_rebuilds"), ("failover-plan-pigeon.toml", "pigeon", "failovers")])
def test_the_documented_failover_plans_end_with_every_invariant_ok(plan_name, scheduler, counter, tmp_path):
    """The failover examples of docs/faults.md, with 2% loss on every link: every job completes, each protocol
    path they show is taken."""
    from pathlib import Path

    docs = Path(__file__).resolve().parent.parent / "docs"
    out = tmp_path / "o"
    code = main(["run", "default", "--quiet", "--set", f"scheduler={scheduler}", "--set", "loss=0.02",
                 "--faults", str(docs / plan_name), "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0 and set(summary["invariants"].values()) == {"ok"}, summary["invariants"]
    assert summary["counters"][counter] >= 1 and summary["faults"]["crashes"] == 7


def test_a_journal_with_nested_messages_verifies_in_a_fresh_process(tmp_path):
    """Every GM crashed for good: the submitter hands jobs again (a Resubmit carrying the Job); a fresh
    replay process must know the nested Job's class before it reads the records (it said 'unknown
    message tag' before)."""
    import subprocess
    import sys

    plan_file = tmp_path / "gms.toml"
    plan_file.write_text('[[fault]]\nat_s = 1.0\nkind = "crash"\ntarget = {role = "gm", count = "all"}\n')
    out = tmp_path / "o"
    assert main(["run", "default", "--quiet", "--set", "jobs=20", "--faults", str(plan_file), "--record",
                 "--out", str(out)]) == 1
    proc = subprocess.run([sys.executable, "-m", "fedemu", "replay", str(out / "messages.log"), "--verify"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "digest matches (run ended with: violation: jobs_closed" in proc.stdout, proc


# ---- runs whose faults never heal still end (issue 45) ------------------------------------------------
NEVER_HEALED = {
    "loss=1": (["--set", "loss=1"], None, "loss 1 on every link, from the start"),
    "loss=0.999": (["--set", "loss=0.999"], None, "loss 0.999 on every link, from the start"),
    "a partition never healed": ([], '[[fault]]\nat_s = 0.5\nkind = "partition"\n'
                                     'sides = [{role = "gm", count = "all"}, {role = "lm", count = "all"}]\n',
                                 "partition {gm-0, gm-1, gm-2} | {lm-0, lm-1, lm-2, lm-3}"),
    "a loss never ended": ([], '[[fault]]\nat_s = 0.5\nkind = "loss"\nlink = "*"\nvalue = 1.0\n',
                           "loss 1 on every link"),
}


@pytest.mark.parametrize("name", list(NEVER_HEALED))
def test_a_run_whose_faults_never_heal_ends_at_its_horizon_and_says_which_fault(name, tmp_path):
    """`fedemu run default --set loss=1 --set jobs=5` (or a plan whose partition or loss never heals) ran on
    for ever, printing nothing. It ends at its horizon: one line, exit 1, naming the jobs not done, the fault
    still in force and how the horizon was derived; the journal is kept and replays identical."""
    import subprocess
    import sys

    sets, plan_text, in_force = NEVER_HEALED[name]
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "fedemu", "run", "default", "--quiet", "--set", "jobs=5", *sets, "--record",
           "--out", str(out)]
    if plan_text:
        (tmp_path / "plan.toml").write_text(plan_text)
        cmd += ["--faults", str(tmp_path / "plan.toml")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # (it never ended before)
    err = proc.stderr
    assert proc.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("fedemu: violation: jobs_closed: job 0: never completed; "), err
    summary = json.loads((out / "summary.json").read_text())
    horizon = summary["horizon"]
    assert horizon["in_force"] == [in_force] and summary["virtual_end_s"] >= horizon["at_s"]
    w = horizon["workload_horizon_s"]
    assert horizon["at_s"] == pytest.approx(max(horizon["last_fault_s"], w) + 300 + 2 * w, abs=1e-6)
    assert f"(+4 more); a fault never healed ({in_force}), so the run was stopped at its horizon, " \
           f"{horizon['at_s']:g} s ({horizon['derived']}); the journal is kept in " in err
    assert main(["replay", str(out / "messages.log"), "--verify"]) == 0


def test_a_horizon_changes_no_run_that_ends_by_itself(monkeypatch):
    """A fault-free run has no horizon; a run whose faults heal has one but ends as it would without it
    (the same digest), as does a run with loss that never ends (``--set loss``) but ends by itself."""
    from fedemu.tools.run import runner

    free = runner.execute("default", overrides={"jobs": 40})
    assert free.fabric.horizon_us is None
    from pathlib import Path

    plan = fp.load(Path(__file__).resolve().parent.parent / "docs" / "failover-plan.toml")
    cases = [({"jobs": 40}, plan), ({"jobs": 40, "loss": 0.05}, None)]
    with_horizon = [runner.execute("default", overrides=o, faults=f) for o, f in cases]
    assert all(r.fabric.horizon_us is not None and not r.fabric.stopped_at_horizon for r in with_horizon)
    monkeypatch.setattr(runner, "run_horizon", lambda run, fabric: None)
    assert [runner.execute("default", overrides=o, faults=f).digest for o, f in cases] == \
        [r.digest for r in with_horizon]


# ---- plan events that would do nothing, and the submitter (issue 45) ----------------------------------

NO_OPS = [
    ("restart-of-an-actor-up-again",
     '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "lm-0"\nfor_s = 1\n\n[[fault]]\nat_s = 3\nkind = "restart"\n'
     'target = "lm-0"\n',
     "plan.toml:7: fault 2 (restart at 3 s): restart of lm-0: it is up again since its restart at 2 s, so the "
     "restart would do nothing"),
    ("restart-of-an-actor-never-crashed", '[[fault]]\nat_s = 1\nkind = "restart"\ntarget = "gm-1"\n',
     "plan.toml:1: fault 1 (restart at 1 s): restart of gm-1: nothing crashed gm-1 before then, so the restart "
     "would do nothing"),
    ("two-crashes-at-one-instant",
     '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "lm-0"\n\n[[fault]]\nat_s = 1\nkind = "crash"\n'
     'target = ["lm-1", "lm-0"]\n',
     "plan.toml:6: fault 2 (crash at 1 s): lm-0 is already down (the plan crashed it at 1 s), so the crash would "
     "do nothing"),
    ("a-crash-while-down", '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "w-3"\nfor_s = 5\n\n[[fault]]\nat_s = 2\n'
     'kind = "crash"\ntarget = "w-3"\nfor_s = 1\n', "plan.toml:7: fault 2 (crash at 2 s): w-3 is already down"),
    ("a-heal-with-nothing-to-heal", '# nothing cut\n[[fault]]\nat_s = 1\nkind = "heal"\n',
     "plan.toml:2: fault 1 (heal at 1 s): no partition is in force then, so the heal would do nothing"),
    ("a-heal-after-an-ended-partition",
     '[[fault]]\nat_s = 1\nkind = "partition"\nsides = [["gm-0"], ["lm-0"]]\nfor_s = 1\n\n[[fault]]\nat_s = 5\n'
     'kind = "heal"\n', "plan.toml:7: fault 2 (heal at 5 s): no partition is in force then"),
    ("submitter-crash", '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "submitter"\nfor_s = 1\n',
     "plan.toml:1: fault 1 (crash at 1 s): submitter cannot crash: it is the workload's owner of record, not part of "
     "a scheduler, and a crash would lose the jobs it holds, which no scheduler could recover (docs/faults.md); "
     "crash targets: the actors of roles worker, gm, lm, manager"),
    ("submitter-restart", '[[fault]]\nat_s = 1\nkind = "restart"\ntarget = ["w-0", "submitter"]\n',
     "plan.toml:1: fault 1 (restart at 1 s): submitter cannot restart"),
]


@pytest.mark.parametrize("text, says", [c[1:] for c in NO_OPS], ids=[c[0] for c in NO_OPS])
def test_a_plan_event_that_would_do_nothing_is_refused_with_file_and_line(text, says):
    """Finding: a restart of an actor already back up, two crashes of one actor at one instant and a heal with
    nothing to heal passed in silence, while a lone restart of a running actor was refused; the submitter
    was accepted as a crash target, and its crash was then blamed on the scheduler."""
    with pytest.raises(ConfigError) as info:
        fp.check_no_ops([], parse(text).placed(NAMES, 1))
    assert str(info.value) == says or str(info.value).startswith(says), str(info.value)


@pytest.mark.parametrize("text", [
    '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "lm-0"\nfor_s = 1\n\n[[fault]]\nat_s = 2\nkind = "crash"\n'
    'target = "lm-0"\nfor_s = 1\n',  # down again at the instant it came up: both do something
    '[[fault]]\nat_s = 1\nkind = "partition"\nsides = [["gm-0"], ["lm-0"]]\n\n[[fault]]\nat_s = 2\nkind = "partition"'
    '\nsides = [["gm-1"], ["lm-1"]]\n\n[[fault]]\nat_s = 3\nkind = "heal"\n',  # one heal ends both partitions
])
def test_plans_whose_every_event_does_something_pass(text):
    fp.check_no_ops([], parse(text).placed(NAMES, 1))


def test_a_scenario_crash_makes_a_plan_restart_do_something():
    """The scenario's own events (failure processes) count: a plan may restart what they crashed."""
    fp.check_no_ops([Fault(500_000, "crash", ("w-2",))], parse('[[fault]]\nat_s = 1\nkind = "restart"\n'
                                                               'target = "w-2"\n').placed(NAMES, 1))


def test_a_no_op_on_the_command_line_is_one_line_exit_2_naming_file_and_line(tmp_path, capsys):
    plan_file = tmp_path / "p.toml"
    plan_file.write_text(NO_OPS[2][1])
    code = main(["run", "default", "--quiet", *JOBS, "--faults", str(plan_file), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err == f"fedemu: error: {tmp_path}/{NO_OPS[2][2]}\n".replace("plan.toml", "p.toml")
    assert not (tmp_path / "o").exists()
