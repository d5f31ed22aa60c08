"""The report's per-case tables read back as one frame (what the experiment scripts re-predict)."""

import pandas as pd
import pytest

from perfmodel.holdout import sets
from perfmodel.report import write_gzipped, written


def test_the_suite_and_each_written_held_out_set_come_back_labelled(tmp_path):
    folder = tmp_path / "h200"
    folder.mkdir()
    suite = pd.DataFrame({"case_id": ["a", "b"], "predicted": [1.0, 2.0], "measured": [1.25, 2.5]})
    suite["rel_error"] = [-0.2, -0.2]
    first, second = sets()[:2]
    held = suite.assign(predicted=[0.9, 1.9], predicted_now=[1.1, 2.1], rel_error_now=[-0.12, -0.16])
    write_gzipped(suite, folder, "comparison")
    write_gzipped(held, folder, first)  # `second` was not measured: no table
    t = written("h200", tmp_path)
    assert list(t.set) == ["suite", "suite", first, first] and second not in set(t.set)
    assert list(t.predicted_now) == [1.0, 2.0, 1.1, 2.1]  # the suite's own prediction is today's model
    assert list(t.rel_error_now) == [-0.2, -0.2, -0.12, -0.16]


def test_a_folder_without_a_report_says_to_build_one(tmp_path):
    with pytest.raises(SystemExit, match="perfmodel report"):
        written("h200", tmp_path)
