"""A sweep's output files (studies/sweep.py writes them in pieces on a background thread) hold exactly the text
of the plain writers: write_json of the rows and of the result, write_csv of the rows; a rerun from the cache
writes the same files."""

from simulator.common.jsonfile import dumps
from simulator.config import parse_scenario
from simulator.report.html import csv_text
from simulator.studies import sweep as S

SC = {"kind": "sweep", "name": "x", "models": ["qwen3-0.6b"], "profiles": ["h200"], "fusion": ["none", "fused"],
      "graph": ["none", "full"], "layouts": [{"name": "v", "sizes": "vllm"}, {"name": "p", "sizes": [1, 2, 4, 8]}],
      "distributions": [{"name": "d", "histogram": {2: 1.0, 8: 3.0}}],
      "budgets": ["64MiB", "1GiB", "2GiB"], "workers": 1}


def _check(out, res):
    assert (out / "results.json").read_bytes() == (dumps(res["rows"], indent=2) + "\n").encode()
    assert (out / "result.json").read_bytes() == (dumps(res, indent=2) + "\n").encode()
    assert (out / "results.csv").read_bytes() == csv_text(res["rows"]).encode()
    assert (out / "report.html").is_file()


def test_the_files_are_the_plain_writers_text(tmp_path, monkeypatch):
    monkeypatch.setattr(S, "JSON_BLOCK", 2)  # many pieces, and a last one of a single row
    sc = parse_scenario(SC)
    res = S.run_sweep_scenario(sc, tmp_path, progress=False)
    assert len(res["rows"]) == 24 and res["computed"] == 24
    _check(tmp_path, res)
    again = S.run_sweep_scenario(sc, tmp_path, progress=False)  # rows from the cache: one piece per row's own text
    assert again["cached"] == 24
    _check(tmp_path, again)
