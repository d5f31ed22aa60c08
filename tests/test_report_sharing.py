"""The report's TILE 16 sharing rows: which predicted each row's L1 sharing, and its k and grid width."""

import json

import pandas as pd

from perfmodel.report.sharing import sharing_rows


def _row(case: str, m: int, n: int, k: int, error: float, **extra: int) -> dict:
    params = {"k": k, "m": m, "n": n, "tile": 16, **extra}
    cid = f"{case}[{','.join(f'{a}={b}' for a, b in sorted(params.items()))}]"
    return {"case": case, "case_id": cid, "params": json.dumps(params), "metric": "l2_requested_read_sectors",
            "rel_error": error, "rel_error_now": error}


def test_rows_name_the_placement_or_the_law_by_width():
    suite = pd.DataFrame([_row("matmul.tiled", 2048, 3072, 2048, 0.05),  # placement recorded
                          _row("matmul.tiled", 2000, 5000, 1000, 0.07),  # none: the law, 313 blocks a row
                          _row("matmul.tiled", 1000, 1000, 1000, -0.01)])
    held = [pd.DataFrame([_row("matmul.corner_turning", 900, 3000, 700, 0.04, pad=1),
                          _row("matmul.tiled", 900, 3000, 700, 0.5, tile=32)])]  # TILE 32: not drawn
    t = sharing_rows(held, suite, "h200")
    assert len(t) == 4
    by = {(r.k, r.blocks_a_row): r.predictor for r in t.itertuples()}
    assert by == {(2048, 192): "own recorded placement", (1000, 313): "law, past 264 blocks a row",
                  (1000, 63): "law, up to 132 blocks a row", (700, 188): "law, 133-264 blocks a row"}
