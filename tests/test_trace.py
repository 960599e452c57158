"""The .tr loader: real example traces, exact error messages, early stop and rounding rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.model import US_PER_S
from fedemu.scenarios.trace import TraceError, count_trace, read_trace

# The repo and the shared data sit side by side: /work/main and /work/shared (also in CI clones).
TRACES = Path(__file__).resolve().parents[2] / "shared/data/meghanat_megha_simulator/traces/input"


def _example(name: str) -> Path:
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"example trace {path} is not available")
    return path


def _write(tmp_path: Path, text: str, name: str = "x.tr") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(path: Path, **kw) -> str:
    with pytest.raises(TraceError) as info:
        list(read_trace(path, **kw))
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "jobs", "tasks"),
    [("YH1_sub.tr", 2910, 122878), ("GOOG_subtrace.tr", 10000, 312558), ("YH_small.tr", 10, 183)],
)
def test_example_traces_have_the_published_counts(name, jobs, tasks):
    path = _example(name)
    loaded = list(read_trace(path))
    assert len(loaded) == jobs
    assert sum(j.num_tasks for j in loaded) == tasks
    assert [j.job_id for j in loaded] == list(range(jobs))
    assert all(a.arrival_us <= b.arrival_us for a, b in zip(loaded, loaded[1:]))
    assert all(d >= 1 for j in loaded for d in j.durations_us)
    assert count_trace(path) == (jobs, tasks)


def test_first_line_of_yh_small_is_converted_to_microseconds():
    job = next(read_trace(_example("YH_small.tr"), first_job_id=7))
    assert job.job_id == 7
    assert job.arrival_us == 7_527_000
    assert job.num_tasks == 51
    assert job.durations_us[:2] == (6_441_536, 12_973_575)
    assert job.constraints == ((),) * 51


def test_jobs_limit_stops_reading(tmp_path):
    path = _write(tmp_path, "0 1 1 1\n1 1 1 1\n2 1 1 1\nthis line is never read\n")
    assert [j.job_id for j in read_trace(path, jobs=3)] == [0, 1, 2]
    assert list(read_trace(path, jobs=0)) == []
    assert "x.tr:4:" in _error(path, jobs=4)


def test_jobs_limit_on_a_real_trace():
    jobs = list(read_trace(_example("GOOG_subtrace.tr"), jobs=5, first_job_id=100))
    assert [j.job_id for j in jobs] == [100, 101, 102, 103, 104]


def test_blank_lines_repeated_arrivals_and_crlf(tmp_path):
    path = _write(tmp_path, "\n0.5 2 1.5 1 2\r\n   \n0.5 1 3 3\n\n1 1 0.0000001 0.0000001")
    jobs = list(read_trace(path))
    assert [(j.job_id, j.arrival_us, j.durations_us) for j in jobs] == [
        (0, 500_000, (US_PER_S, 2 * US_PER_S)),
        (1, 500_000, (3_000_000,)),
        (2, US_PER_S, (1,)),  # 0.1 us rounds to 0 and is clamped to 1 us
    ]
    assert count_trace(path) == (3, 4)


def test_zero_duration_is_clamped_to_one_microsecond(tmp_path):
    path = _write(tmp_path, "0 3 0 0 0.0000004 2\n")
    assert next(read_trace(path)).durations_us == (1, 1, 2_000_000)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("0 2 1 1 abc", "field 5 (dur_2) is 'abc', expected a number"),
        ("0 2 1 1 -1", "field 5 (dur_2) is '-1', expected a finite number >= 0"),
        ("0 2 1 1 nan", "field 5 (dur_2) is 'nan', expected a finite number >= 0"),
        ("0 2 1 1 1_0", "field 5 (dur_2) is '1_0', expected a number"),
        ("x 1 1 1", "field 1 (arrival_s) is 'x', expected a number"),
        ("-3 1 1 1", "field 1 (arrival_s) is '-3', expected a finite number >= 0"),
        ("0 1 inf 1", "field 3 (mean_task_duration_s) is 'inf', expected a finite number >= 0"),
        ("0 5 1 1 2 3", "num_tasks is 5 but the line has 3 durations"),
        ("0 1 1 1 2", "num_tasks is 1 but the line has 2 durations"),
        ("0 0 1", "field 2 (num_tasks) is '0', expected a positive integer"),
        ("0 2.0 1 1 1", "field 2 (num_tasks) is '2.0', expected a positive integer"),
        ("0 -1 1 1", "field 2 (num_tasks) is '-1', expected a positive integer"),
        ("0 1", "the line has 2 fields, expected arrival_s num_tasks mean_task_duration_s dur_1 ... dur_n"),
        ("7", "the line has 1 field, expected arrival_s num_tasks mean_task_duration_s dur_1 ... dur_n"),
    ],
)
def test_malformed_lines_are_reported_exactly(tmp_path, line, message):
    path = _write(tmp_path, f"0 1 1 1\n\n{line}\n")
    assert _error(path) == f"{path}:3: {message}"


def test_decreasing_arrival_is_an_error(tmp_path):
    path = _write(tmp_path, "1 1 1 1\n2.5 1 1 1\n2.4 1 1 1\n")
    assert _error(path) == (
        f"{path}:3: field 1 (arrival_s) is '2.4', before the previous job's '2.5'; "
        "arrivals must be non-decreasing"
    )


def test_count_trace_checks_structure(tmp_path):
    path = _write(tmp_path, "0 1 1 1\n0 3 1 1\n")
    with pytest.raises(TraceError, match=r"x\.tr:2: num_tasks is 3 but the line has 1 durations$"):
        count_trace(path)


def test_missing_file_is_reported_at_call_time(tmp_path):
    path = tmp_path / "nope.tr"
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert str(info.value) == f"{path}: no such trace file"
    with pytest.raises(TraceError, match="no such trace file"):
        count_trace(path)
    with pytest.raises(TraceError, match="is not a regular file"):
        read_trace(tmp_path)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"jobs": -1}, "jobs is -1, expected an integer >= 0"),
        ({"jobs": 2.0}, "jobs is 2.0, expected an integer >= 0"),
        ({"first_job_id": -5}, "first_job_id is -5, expected an integer >= 0"),
        ({"first_job_id": True}, "first_job_id is True, expected an integer >= 0"),
    ],
)
def test_bad_arguments_are_config_errors(tmp_path, kw, message):
    path = _write(tmp_path, "0 1 1 1\n")
    with pytest.raises(ConfigError) as info:
        read_trace(path, **kw)
    assert str(info.value) == message


def test_undecodable_bytes_fail_as_a_bad_number(tmp_path):
    path = tmp_path / "bin.tr"
    path.write_bytes(b"0 1 1 \xff\xfe\n")
    assert _error(path) == f"{path}:1: field 4 (dur_1) is '\ufffd\ufffd', expected a number"


_seconds = st.floats(min_value=0, max_value=1e5, allow_nan=False, allow_infinity=False)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(_seconds, st.lists(_seconds, min_size=1, max_size=6)), min_size=1, max_size=8))
def test_round_trip_of_generated_traces(tmp_path_factory, rows):
    rows.sort(key=lambda r: r[0])
    text = "".join(f"{a!r} {len(d)} 0 {' '.join(repr(x) for x in d)}\n" for a, d in rows)
    path = tmp_path_factory.mktemp("gen") / "g.tr"
    path.write_text(text)
    jobs = list(read_trace(path))
    assert len(jobs) == len(rows)
    for job, (arrival, durations) in zip(jobs, rows):
        assert job.arrival_us == round(arrival * US_PER_S)
        assert job.durations_us == tuple(max(1, round(x * US_PER_S)) for x in durations)
    assert count_trace(path) == (len(rows), sum(len(d) for _, d in rows))


def test_every_error_is_a_fedemu_error(tmp_path):
    assert issubclass(TraceError, FedemuError)


@pytest.mark.parametrize("tok", ["1e300", "1e13", "1e12", "10000000.5"])
@pytest.mark.parametrize("field", [0, 3])
def test_times_beyond_the_bound_are_file_line_errors(tmp_path, tok, field):
    fields = ["0", "1", "1", "1"]
    fields[field] = tok
    path = _write(tmp_path, "0 1 1 1\n" + " ".join(fields) + "\n")
    name = "arrival_s" if field == 0 else "dur_1"
    assert _error(path) == (f"{path}:2: field {field + 1} ({name}) is {tok!r}, "
                            "more than the largest time a trace may give, 1e+07 s")


def test_the_bound_itself_is_accepted(tmp_path):
    path = _write(tmp_path, "10000000 1 1 10000000\n")
    (job,) = read_trace(path)
    assert job.arrival_us == job.durations_us[0] == 10_000_000_000_000


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n\n"])
def test_a_trace_without_jobs_is_an_error_at_once(tmp_path, text):
    path = _write(tmp_path, text)
    message = f"{path}: the trace has no jobs (the file is empty or has only blank lines)"
    with pytest.raises(TraceError) as info:
        read_trace(path)  # checked when called, before any job is read
    assert str(info.value) == message
    with pytest.raises(TraceError) as info:
        count_trace(path)
    assert str(info.value) == message


_token = st.one_of(
    st.sampled_from(["0", "1", "-1", "1e300", "1e13", "1e12", "1e7", "nan", "inf", "-inf", "1_0", "0x10",
                     "", "1.5", "2", "3", "+1", "٣", "1e-300", "9" * 400]),
    st.floats().map(repr),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.text(max_size=6),
)
_line = st.one_of(st.lists(_token, max_size=8).map(" ".join), st.text(max_size=20))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.lists(_line, max_size=6).map(lambda ls: "\n".join(ls).encode(
    "utf-8", "surrogatepass"))))
def test_fuzzed_trace_files_load_or_give_a_file_line_error(tmp_path_factory, data):
    """Random bytes and random line shapes: every job the reader yields is in bounds, else FILE:LINE error."""
    path = tmp_path_factory.mktemp("fuzz") / "f.tr"
    path.write_bytes(data)
    try:
        jobs = list(read_trace(path))
    except TraceError as e:
        text = str(e)
        assert text.startswith(f"{path}:")
        assert "\n" not in text  # one line
        if "no jobs" not in text:
            lineno = text[len(str(path)) + 1:].split(":", 1)[0]
            assert lineno.isdigit() and int(lineno) >= 1
        return
    assert jobs
    bound = 10_000_000 * US_PER_S
    for a, b in zip(jobs, jobs[1:]):
        assert a.arrival_us <= b.arrival_us
    for job in jobs:
        assert 0 <= job.arrival_us <= bound
        assert all(1 <= d <= bound for d in job.durations_us)


_TOKEN = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(0, 2e7).map(repr),
    st.integers(-5, 10**8).map(str),
    st.sampled_from(["1_0", "nan", "-inf", "inf", "1e7", "1e7000", "-0.0", "0x10", "", "1e", " 3", "٣", "+2", "2."]),
)


@settings(max_examples=300)
@given(tokens=st.lists(_TOKEN, min_size=1, max_size=6))
def test_a_lines_durations_read_at_once_are_those_read_one_by_one(tokens):
    """``_plain_seconds`` gives the floats ``_seconds`` gives field by field when it accepts every one, and
    None (the field-by-field read then names the bad one) when it refuses any."""
    from fedemu.scenarios.trace import _plain_seconds, _seconds

    fields = ["0", str(len(tokens)), "1", *tokens]
    at_once = _plain_seconds(tokens)
    one_by_one = []
    for i in range(3, len(fields)):
        try:
            one_by_one.append(_seconds("t.tr", 1, fields, i))
        except TraceError:
            assert at_once is None
            return
    assert at_once is not None and [repr(v) for v in at_once] == [repr(v) for v in one_by_one]


_SECONDS = st.one_of(
    st.floats(0, 1e7),
    st.integers(0, 10**13).map(lambda us: (us + 0.5) / US_PER_S),  # a half microsecond, as near as floats get
    st.integers(0, 10**7).map(float),
    st.sampled_from([0.0, -0.0, 5e-7, 1.5e-6, 2.5e-6, 1e-6, 1e7]),
)


@settings(max_examples=300)
@given(seconds=st.lists(_SECONDS, max_size=40))
def test_a_lines_durations_in_microseconds_at_once_are_those_one_by_one(seconds):
    """``durations_us`` (numpy from ``VECTOR_FROM`` durations on) gives what ``seconds_to_us`` floored at
    MIN_TASK_US gives for each duration: the same integers, halves rounded to even."""
    from fedemu.model import seconds_to_us
    from fedemu.scenarios.trace import MIN_TASK_US, VECTOR_FROM, durations_us

    expected = [max(seconds_to_us(s), MIN_TASK_US) for s in seconds]
    got = durations_us(seconds)
    assert type(got) is tuple and all(type(us) is int for us in got) and list(got) == expected
    assert list(durations_us(seconds * VECTOR_FROM)) == expected * VECTOR_FROM  # the numpy path, whatever the size
