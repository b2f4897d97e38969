"""Serving inputs: arrival processes, length distributions, traces and their one-line errors."""

import numpy as np
import pytest

from simulator.serving.arrivals import (ArrivalError, ArrivalSpec, LengthSpec, child_seeds, load_trace,
                                        make_workload)

LOGN = LengthSpec("lognormal", mean=300, cv=1.0, low=1, high=100000)
FIX = LengthSpec("fixed", value=64)


def test_poisson_rate_and_gap_cv_within_sampling_error():
    wl = make_workload(ArrivalSpec("poisson"), FIX, FIX, 50.0, 400.0, 1)
    n = len(wl)
    assert abs(n - 20000) < 4 * np.sqrt(20000)
    gaps = np.diff(wl.times)
    assert abs(gaps.std() / gaps.mean() - 1.0) < 0.05
    assert np.all(gaps >= 0) and wl.times[-1] < 400.0


def test_gamma_arrivals_have_the_requested_cv():
    wl = make_workload(ArrivalSpec("gamma", cv=3.0), FIX, FIX, 20.0, 1000.0, 2)
    gaps = np.diff(wl.times)
    assert abs(len(wl) / 1000.0 - 20.0) < 2.0
    assert abs(gaps.std() / gaps.mean() - 3.0) < 0.3


def test_common_random_numbers_across_rates():
    a = make_workload(ArrivalSpec("poisson"), LOGN, LOGN, 10.0, 100.0, 7)
    b = make_workload(ArrivalSpec("poisson"), LOGN, LOGN, 20.0, 100.0, 7)
    n = len(a)
    assert len(b) >= n
    np.testing.assert_allclose(b.times[:n], a.times / 2, rtol=1e-12)
    assert np.array_equal(a.prompt, b.prompt[:n]) and np.array_equal(a.output, b.output[:n])


def test_same_seed_same_workload_and_seed_sequence_not_mutated():
    ss = np.random.SeedSequence(11)
    a = make_workload(ArrivalSpec("poisson"), LOGN, LOGN, 5.0, 50.0, ss)
    b = make_workload(ArrivalSpec("poisson"), LOGN, LOGN, 5.0, 50.0, ss)
    assert np.array_equal(a.times, b.times) and np.array_equal(a.prompt, b.prompt)
    c = make_workload(ArrivalSpec("poisson"), LOGN, LOGN, 5.0, 50.0, np.random.SeedSequence(12))
    assert not np.array_equal(a.times[:10], c.times[:10])
    # child_seeds matches SeedSequence.spawn on a fresh sequence
    x = [np.random.default_rng(s).random() for s in child_seeds(np.random.SeedSequence(3), 3)]
    y = [np.random.default_rng(s).random() for s in np.random.SeedSequence(3).spawn(3)]
    assert x == y


def test_length_distributions():
    rng = np.random.default_rng(0)
    u = LengthSpec("uniform", low=10, high=20).draw(rng, 5000)
    assert u.min() == 10 and u.max() == 20
    ln = LengthSpec("lognormal", mean=400, cv=0.5, low=1, high=10**6).draw(rng, 50000)
    assert abs(ln.mean() / 400 - 1) < 0.02 and abs(ln.std() / ln.mean() - 0.5) < 0.03
    clipped = LengthSpec("lognormal", mean=400, cv=2.0, low=50, high=500).draw(rng, 5000)
    assert clipped.min() >= 50 and clipped.max() <= 500
    assert set(FIX.draw(rng, 10)) == {64}


@pytest.mark.parametrize("rate", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_rate_is_a_user_error(rate):
    with pytest.raises(ArrivalError, match="rate"):
        make_workload(ArrivalSpec("poisson"), FIX, FIX, rate, 10.0, 0)


def test_bad_length_spec():
    with pytest.raises(ArrivalError, match="prompt"):
        make_workload(ArrivalSpec("poisson"), LengthSpec("uniform", low=5, high=2), FIX, 1.0, 10.0, 0)


def _write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_trace_loads_shifts_and_rescales(tmp_path):
    p = _write(tmp_path, "# comment\ntimestamp,prompt_tokens,output_tokens\n10.0,100,5\n10.5,200,6\n12.0,300,7\n")
    tr = load_trace(p)
    assert tr.times.tolist() == [0.0, 0.5, 2.0] and tr.prompt.tolist() == [100, 200, 300]
    assert tr.native_rate == pytest.approx(1.0)
    wl = make_workload(ArrivalSpec("trace", trace=str(p)), FIX, FIX, 4.0, 100.0, 0)
    assert wl.times.tolist() == pytest.approx([0.0, 0.125, 0.5]) and wl.output.tolist() == [5, 6, 7]
    native = make_workload(ArrivalSpec("trace", trace=str(p)), FIX, FIX, None, 1.0, 0)
    assert native.times.tolist() == [0.0, 0.5]  # the duration cuts the trace


@pytest.mark.parametrize("text,where,what", [
    ("", "", "empty trace"),
    ("# only a comment\n", "", "empty trace"),
    ("timestamp,prompt_tokens,output_tokens\n", "", "no requests"),
    ("time,prompt_tokens,output_tokens\n1,2,3\n", ":1:", "missing timestamp"),
    ("timestamp,prompt_tokens,output_tokens\n0,10,5\nabc,10,5\n", ":3:", "'timestamp': not a number"),
    ("timestamp,prompt_tokens,output_tokens\n0,10,5\n1,ten,5\n", ":3:", "'prompt_tokens': not an integer"),
    ("timestamp,prompt_tokens,output_tokens\n0,10,5\n\n1,10,0\n", ":4:", "'output_tokens': must be a positive"),
    ("timestamp,prompt_tokens,output_tokens\n5,10,5\n1,10,5\n", ":3:", "non-decreasing"),
    ("timestamp,prompt_tokens,output_tokens\n-1,10,5\n", ":2:", ">= 0"),
    ("timestamp,prompt_tokens,output_tokens\n0,10\n", ":2:", "expected 3 columns"),
])
def test_malformed_traces_name_file_and_line(tmp_path, text, where, what):
    p = _write(tmp_path, text)
    with pytest.raises(ArrivalError) as e:
        load_trace(p)
    msg = str(e.value)
    assert str(p) in msg and where in msg and what in msg and "\n" not in msg


def test_missing_trace_file(tmp_path):
    with pytest.raises(ArrivalError, match="no such trace file"):
        load_trace(tmp_path / "nope.csv")


def test_absurd_request_counts_are_refused_before_allocating():
    with pytest.raises(ArrivalError, match="exceeds the limit"):
        make_workload(ArrivalSpec("poisson"), FIX, FIX, 1e9, 3600.0, 0)


def test_a_repeated_header_row_is_refused_in_traces_as_in_length_files(tmp_path):
    """One CSV reader for arrival traces and length files (serving/arrivals._csv_rows): two files concatenated
    are refused in both, naming the file and the line of the second header."""
    from simulator.serving.arrivals import ArrivalError, load_lengths, load_trace

    t = tmp_path / "t.csv"
    t.write_text("timestamp,prompt_tokens,output_tokens\n0,10,5\ntimestamp,prompt_tokens,output_tokens\n1,10,5\n")
    with pytest.raises(ArrivalError, match=r"t\.csv:3: the header row repeats"):
        load_trace(t)
    n = tmp_path / "n.csv"
    n.write_text("len\n3\nlen\n4\n")
    with pytest.raises(ArrivalError, match=r"n\.csv:3: the header row repeats"):
        load_lengths(n)
