"""The perfmodel CLI end to end (in-process)."""

from __future__ import annotations

import json

import pytest

from perfmodel.cli import main
from perfmodel.units import format_bytes


def test_occupancy_report_and_json(capsys, tmp_path):
    assert main(["occupancy", "--device", "H200", "--threads", "256", "--regs", "96", "--smem", "16KiB",
                 "--plot", str(tmp_path / "occ.png")]) == 0
    out = capsys.readouterr().out
    assert "2 blocks, 16 warps, occupancy 25.0 % (limited by registers)" in out
    assert (tmp_path / "occ.png").stat().st_size > 10_000
    assert main(["occupancy", "--threads", "512", "--regs", "64", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["blocks_per_sm"] == 2


def test_bad_input_is_a_clear_error(capsys):
    assert main(["occupancy", "--threads", "2048", "--regs", "32"]) == 2
    assert "threads per block = 2048 violates the limit" in capsys.readouterr().err
    assert main(["smem", "--block", "32", "--index", "tx +* 2"]) == 2
    assert "^" in capsys.readouterr().err
    assert main(["occupancy", "--device", "H300", "--threads", "32", "--regs", "8"]) == 2
    assert "did you mean" in capsys.readouterr().err
    assert main(["predict", "matmul.tiled", "--m", "10", "--n", "10", "--k", "10", "--m", "20"]) == 2
    assert "parameter --m given twice (10 and 20)" in capsys.readouterr().err
    assert main(["predict", "matmul.tiled", "--param", "m=10"]) == 2
    assert "parameter --param needs an integer value, got 'm=10'" in capsys.readouterr().err
    assert main(["predict", "matmul.tiled", "--m", "10", "--n", "10", "--k", "0"]) == 2
    assert "loop ph runs 0 times" in capsys.readouterr().err
    assert main(["predict", "probe.store_lines", "--lines", "3"]) == 2
    assert "lines = 3 must divide a warp's 32 lanes" in capsys.readouterr().err


def test_smem_and_global_speak_cuda(capsys):
    assert main(["smem", "--block", "32x32", "--index", "tx*32 + ty"]) == 0
    assert "32-way bank conflict" in capsys.readouterr().out
    assert main(["smem", "--block", "32x32", "--index", "ty*33 + tx"]) == 0
    assert "no bank conflict" in capsys.readouterr().out
    assert main(["global", "--block", "256", "--index", "(bx*bdx + tx)*stride", "--define", "stride=2",
                 "--elem", "4", "--width", "4"]) == 0
    assert "8 sectors per request), 50.0 % efficient" in capsys.readouterr().out


def test_predict_prints_the_breakdown(capsys):
    assert main(["predict", "matmul.coarsened", "--device", "H200", "--m", "4096", "--n", "4096", "--k", "4096",
                 "--tile", "32", "--coarse", "4"]) == 0
    out = capsys.readouterr().out
    assert "time breakdown" in out and "-bound, predicted" in out
    terms = out.split("time breakdown:\n")[1].split("  =>")[0].splitlines()
    assert len({t.index(" µs") for t in terms}) == 1  # the times line up, whatever the terms' names
    assert main(["predict", "matmul.tiled", "--m", "512", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["flops"] == 2 * 512 * 1024 * 1024
    assert main(["predict", "matmul.tiled", "--m=512", "--json"]) == 0  # --name=value reads the same
    assert json.loads(capsys.readouterr().out)["flops"] == 2 * 512 * 1024 * 1024


def test_predict_draws_the_case_on_the_roofline(capsys, tmp_path):
    """--plot: the case's dots at each level's arithmetic intensity and the FLOP rate its predicted time
    attains; a kernel without FLOPs has no dot, and says so."""
    from perfmodel import predict
    from perfmodel.report.figures import roofline_points

    png = tmp_path / "roof.png"
    assert main(["predict", "matmul.tiled", "--m", "1000", "--n", "1200", "--k", "900", "--tile", "16",
                 "--plot", str(png)]) == 0
    assert f"roofline written to {png}" in capsys.readouterr().out and png.stat().st_size > 10_000
    p = predict("matmul.tiled", "H200", m=1000, n=1200, k=900, tile=16)
    dots = roofline_points(p, "x")
    assert {d["level"] for d in dots} == {"l1", "l2", "dram"}
    for d in dots:
        assert d["ai"] == p.arithmetic_intensity[d["level"]]
        assert d["predicted_flops"] * p.time_s == pytest.approx(p.flops)
    assert main(["predict", "transpose.naive", "--rows", "1000", "--cols", "1000", "--plot", str(png)]) == 2
    assert "FLOPs = 0" in capsys.readouterr().err


def test_predict_beside_what_was_measured(capsys):
    """--measured: the recorded ncu counts and times of exactly this case beside the prediction (the
    DRAM reads are the median of the recorded ncu runs' dram__bytes_read.sum); an unrecorded shape names the
    nearest recorded ones."""
    from perfmodel.measurements import load

    assert main(["predict", "matmul.tiled", "--m", "2048", "--n", "4096", "--k", "2048", "--tile", "16",
                 "--measured"]) == 0
    out = capsys.readouterr().out
    assert "measured (suite;" in out and "driver" in out
    d = load("h200")
    raw = d[(d.case_id == "matmul.tiled[k=2048,m=2048,n=4096,tile=16]") & (d.metric == "dram__bytes_read.sum")
            & (d.source == "ncu")]
    line = next(x for x in out.splitlines() if x.split()[:1] == ["dram_read_bytes"])
    assert float(line.split()[3]) == pytest.approx(raw.value.median(), rel=1e-5)
    assert main(["predict", "matmul.tiled", "--m", "2000", "--n", "4000", "--k", "2000", "--tile", "16",
                 "--measured"]) == 0
    assert "nearest recorded: matmul.tiled[k=2048,m=2048,n=4088,tile=16]" in capsys.readouterr().out


def test_sweep_shows_coarsening_save_the_textbook_share_of_loads(capsys, tmp_path):
    """perfmodel sweep: one row a value; coarsened matmul's global loads fall by the textbook's
    (1 + 1/C) / 2 - 25, 37.5, 43.75 % for C = 2, 4, 8 - with its C stores beside them; the figure is written."""
    from perfmodel.sweep import parse_values, sweep

    assert parse_values("1024:8192:x2") == [1024, 2048, 4096, 8192]
    assert parse_values("512:1536:512") == [512, 1024, 1536]
    t = sweep("matmul.coarsened", "H200", "coarse", [1, 2, 4, 8], progress=False, m=4096, n=4096, k=4096, tile=32)
    stores = 4096 * 4096 * 4
    loads = t.global_bytes - stores
    assert list(loads / loads.iloc[0]) == pytest.approx([1, 0.75, 0.625, 0.5625], rel=1e-6)
    png = tmp_path / "sweep.png"
    assert main(["sweep", "matmul.coarsened", "--vary", "coarse=1,2,4,8", "--m", "4096", "--n", "4096", "--k", "4096",
                 "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert len([x for x in out.splitlines() if x.split()[:1] in (["1"], ["2"], ["4"], ["8"])]) == 4
    assert png.stat().st_size > 10_000
    assert main(["sweep", "matmul.tiled", "--vary", "m=1024", "--m", "5"]) == 2
    assert "both swept and fixed" in capsys.readouterr().err
    assert main(["sweep", "matmul.tiled", "--vary", "m=1:10:0"]) == 2
    assert "step = 0 must be at least 1" in capsys.readouterr().err


def test_devices_and_cases(capsys):
    assert main(["devices"]) == 0
    assert "rtx-5090" in capsys.readouterr().out
    assert main(["cases"]) == 0
    assert "stencil.temporal" in capsys.readouterr().out


@pytest.mark.parametrize("cmd", ["devices", "occupancy", "smem", "global", "predict", "sweep", "report", "validate"])
def test_help_is_complete(cmd, capsys):
    with pytest.raises(SystemExit):
        main([cmd, "--help"])
    assert "usage: perfmodel" in capsys.readouterr().out


def test_every_miss_in_the_gaps_table_names_a_reason_or_says_it_has_none():
    import pandas as pd

    from perfmodel.report import COUNTER_ROWS, gaps

    t = pd.DataFrame({"metric": ["dram_read_bytes", "time_s", "time_s"], "kind": ["counter", "time", "time"],
                      "case": ["transpose.naive_rows", "matmul.coarsened", "stencil.naive"],
                      "rel_error": [-0.07, -0.17, 0.02]})
    html = gaps.table(t, COUNTER_ROWS)
    assert "L2 fills" in html and "shared loads" in html and "stencil.naive" not in html
    assert gaps.reason("time_s", "stencil.naive") == "not explained yet"


def test_sizes_print_as_a_cuda_engineer_writes_them():
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(228 * 1024) == "228 KiB"
    assert format_bytes(1010.4 * 1024**2) == "1010 MiB"  # not '1.01e+03 MiB'
    assert format_bytes(1023.6 * 1024) == "1024 KiB"
    assert format_bytes(512) == "512 B"
