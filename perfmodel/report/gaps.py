"""Where the model misses, case by case, and what the recorded measurements say about why."""

from __future__ import annotations

import html

import pandas as pd

# (compared metric or prefix, case or prefix) -> why, with the evidence; the first match wins
REASONS: list[tuple[str, str, str]] = [
    ("smem_", "", "the L1 data stage passes more where global loads and stores share it (ncu calls them bank "
                  "conflicts); the per-instruction counts are exact - not modelled"),
    ("l2_requested_read_sectors", "matmul.", "blocks sharing A's rows meet on an SM and share its lines in L1: "
                                             "as the launch's recorded placement has them meet where one is "
                                             "(models.placed: 51 suite shapes within 5.7 %; held-out 29, naive "
                                             "within 3.6 %, TILE 16 +6…+9 % at three of five), else at the spread "
                                             "of 183 recorded launches' block starts (coresidency.law; the naive "
                                             "kernel at k a multiple of 1024 +7…+9 %), the first wave's as the "
                                             "dispatcher placed them (coresidency.first_wave). "
                                             "The naive kernel's L1 reuse also follows k mod 16, the times nvcc "
                                             "unrolls its k loop: at 5 and 13, then 3 and 11, then 1, 2, 6, 9 and "
                                             "10 its L1s request more than each block's own sectors, more the "
                                             "larger k (checks/naive_k, 276 shapes), and only where A and B "
                                             "share L1: with either read past it (checks/naive_bypass) the "
                                             "other's misses are flat over k and on the per-block count "
                                             "(perfmodel.naive_k: which lines L1 drops early is not found); "
                                             "grid rows of 66 blocks 5-16 % fewer"),
    ("l2_requested_read_sectors", "probe.barrier_", "two blocks on an SM cycle through one tile pool ~80-140 tiles "
                                                    "apart, one running 1.4-1.65x ahead, and meet in L1 where that "
                                                    "drift passes the other's recent tiles: where their round clocks "
                                                    "were recorded the model replays them (round_replay; the 12 "
                                                    "traced cases within 4.4 %, yet the replay finds only 0.37-1.17x "
                                                    "the hits ncu counts on the same launch); elsewhere (held out) "
                                                    "no hits are predicted, +5..+10 %"),
    ("warp_instructions", "probe.", "the SASS-region fit counts loops by their memory instructions: the FMA/DFMA "
                                    "probes' compute loops hold none and go uncounted (their time is the FP pipe's)"),
    ("l2_write_", "matmul.coarsened", "a warp's C stores meet in a sector where its rows start off one: L1 combines "
                                      "0.75, 0.37 and 0.29 of those seams at C = 2, 4, 8 (the warp-seams law, "
                                      "models.combining, read off plan h200_warp_seams; the requests a little "
                                      "less than the sectors)"),
    ("l2_read_sectors", "", "the L2 slices merge requests for one sector that arrive together: the prediction "
                            "(what the L1s request) is an upper bound"),
    ("l2_write_", "mem.global_store", "L1 combines neighbouring warps' seam sectors at the share measured "
                                      "against the launch's waves (models.combining, plan h200_combine): "
                                      "timing, so the share scatters around the law"),
    ("dram_", "probe.split_store", "partial sectors L2 loses before their second writer (the loss law, fitted "
                                   "at 128/512 MiB a buffer): L2 writes back 0.27-0.68 more per fill, the "
                                   "model 0.5 (each lost sector's two pieces written back apart); not a draw "
                                   "of the pages: at 64 Mi, 65536 apart, five allocations' in-kernel writes "
                                   "repeat within 1 % (checks/split_repeat)"),
    ("dram_", "probe.piece_store", "sectors of 8 writers: lost with the loss law's share at their first-to-last "
                                   "span, one fill and two write-backs each (72 % filled at 28 MiB, the law 67 %); "
                                   "reads within 5 % from 14 MiB, but at 7 MiB the law says 11 %, L2 lost 3 %; "
                                   "at 56 MiB L2 wrote each sector back 3 times, the model twice (held-out 24)"),
    ("l2_write_", "probe.piece_", "L1 combines a block's 4-byte piece stores at a share that falls with the "
                                  "launch's waves (models.combining, read off plans h200_combine's and "
                                  "h200_piece_dip's sizes) - timing: the share at one size moves by the call. "
                                  "At 3 Mi words three calls wrote 0.30-0.31 sectors a word; another card's six "
                                  "launches 0.33-0.35, the law 0.32 (checks/piece_sizes, 1-8 Mi: the law within "
                                  "5 % of that call's median at 13 of 15 sizes)"),
    ("dram_", "transpose.naive", "L2 fills from DRAM some sectors it holds no data of that warps write in 4-byte "
                                 "pieces (checks/fills_check.csv): the model takes the share measured at 32 x 8 "
                                 "threads; 2 and 4 block rows fill a little more, 32 less"),
    ("dram_read_bytes", "matmul.", "B of 20-60 MiB: L2 keeps part of it between the block groups that re-read it - "
                                   "0-100 % lost by variant at one size (plans/h200_reuse.toml); the model replays "
                                   "another shape's recorded schedule (TILE 32, COARSE 2; COARSE 1 that of the "
                                   "kernel with its block size and blocks per SM), reads COARSE 4 and 8's own "
                                   "measured curves over B and a group's A (perfmodel.coarse_curve; held out, "
                                   "COARSE 4 at 26 MiB -24 %) or TILE 16's own "
                                   "measured curve (perfmodel.b_curve, scaled by k and B's pitch; each shape "
                                   "jumps towards all of B at its own size past 43 MiB - 1536 x 4608 x 2560 "
                                   "-27 % at 45 MiB). Lines whose halves two SMs read (TILE 16; TILE 32 "
                                   "where B's pitch is off the 128-byte line, one in COARSE of a COARSE block's) "
                                   "lose 1.2-2.3x what whole lines do "
                                   "(probe.l2_read_split beside probe.l2_read_shared in one run): at n = 5112 "
                                   "TILE 32 loses what TILE 16 does, 1.8x its n = 5120 (the replay scaled by "
                                   "that ratio: -11 %). And one run is one draw of the pages: allocations of "
                                   "one shape read up to 39 % apart (perfmodel.allocation)"),
    ("dram_write_bytes_in_kernel", "", "what L2 writes back before the kernel ends follows its replacement "
                                       "order; under 16 MiB, lines ncu's own setup left dirty dominate"),
    ("time_s", "matmul.coarsened", "COARSE 8, one block per SM: its warps wait on shared loads' results (plan "
                                   "h200_stalls_matmul); it loads its next tile inside the round's work (SASS), "
                                   "so a round costs the idle round plus the DRAM latency's excess for the tile "
                                   "sweeps DRAM serves, a wave's mean (models.hoisted_round_s) - still +3.0 % on "
                                   "average where DRAM serves under 3 % of its loads"),
    ("time_s", "probe.barrier_rounds", "two blocks an SM in one wave: the warp schedulers favour one, which ends "
                                       "its rounds 1.36-1.65x sooner, and the other runs on alone - the launch "
                                       "takes 8.5-8.8 % longer than an even share of the SM (measured, "
                                       "checks/barrier_phase; not modelled)"),
    ("time_s", "probe.barrier_waves", "one short wave: its blocks first read the cold tile pool from DRAM, the "
                                      "highest-numbered first (the ceilings are slopes over many waves)"),
    ("time_s", "probe.load_lines", "issue-bound integer code at 2.9 of 4 warp instructions per cycle: math-pipe "
                                   "and dispatch stalls (plans h200_pipes, h200_stalls) - contention, not modelled"),
    ("time_s", "probe.store_lines", "issue-bound integer code, as probe.load_lines"),
    ("time_s", "probe.copy", "copies of a few MiB end with up to ~20 MB of their writes still in L2"),
    ("time_s", "mem.global_store", "copies of a few MiB end with their writes still in L2 (as probe.copy); "
                                   "scattered 4-byte stores: the L2 request rates of probe.store_lines"),
    ("time_s", "probe.piece_store", "dist 1 at 2^20-2^25 words: with L1's combining now counted right (the "
                                    "waves law) the crossbar carries fewer requests and the model runs 3-15 % "
                                    "fast - the time rule had leaned on a share too small for short launches"),
    ("time_s", "probe.piece_spread", "as probe.piece_store: short launches 2-15 % fast since their combining "
                                     "is counted right"),
    ("time_s", "probe.split_store", "segments stored out of address order (dist 8-262144) run 2-13 % slower "
                                    "than in order at the same bytes (DRAM locality, not modelled); the fills of "
                                    "partial sectors L2 loses first are charged by the law fitted at other sizes"),
    ("time_s", "matmul.naive", "A's row pitch 2-5 words past a multiple of 8 (k = 1026-1029): the data stage "
                               "(0.85 of a wavefront per cycle) and the tag stage (0.90) are both near their limit "
                               "and slow each other (h200_stage); the model takes the slower one alone"),
    ("time_s", "matmul.", "partial last waves: the model charges the busiest SM's blocks; blocks alone on an SM "
                          "at the end run at their own latency, neither a full wave nor a share of one"),
    ("time_s", "transpose.rows", "output rows that do not start on a sector, past the whole L2: DRAM "
                                 "read-modify-writes some of the sectors two blocks write in part, ~250 ps of "
                                 "kernel time each - up to 15 % of them for the padded kernel, more the larger "
                                 "its arrays and the more blocks between the writers, but 0.5-5 % for the "
                                 "unpadded and shared-memory transposes at the same shapes (h200_rmw_map; the "
                                 "transpose page) and ~0 for a shifted copy completed 256-1024 blocks later "
                                 "(h200_split). Charging every such sector the read-modify-write rate put held-"
                                 "out stencils and smaller transposes 9-23 % over - not adopted. A scattered "
                                 "read-modify-write costs ~60 ps, not 250 (probe.store_scatter, "
                                 "checks/store_scatter). ncu "
                                 "(h200_l2_units): no L2 unit is busier than when aligned, while warps wait "
                                 "2.7x longer at the barrier for their loads; uncapped, they find the crossbar "
                                 "refusing their L1s' requests (h200_fabric: 1.6-6.6 % of cycles, other row "
                                 "transposes <= 0.1 %), but capped at 6 they lose as much stalling 0.1-0.2 %"),
    ("time_s", "transpose.smem", "TILE 16 (8 blocks per SM, 248 waves): the phase rule left them 5-18 % fast "
                                 "until refills queue for a busy block dispatcher (M/D/1 at its measured rate); "
                                 "a few remain 5-11 % fast, the dispatcher's queue and the phases interleave"),
    ("time_s", "stencil.temporal", "issue-bound at 3.1 of 4 warp instructions per cycle (ncu, plan "
                                   "h200_stalls_misses): the integer-pipe contention of the L1-resident probes"),
]


def reason(metric: str, case: str) -> str:
    for m, c, why in REASONS:
        if metric.startswith(m) and case.startswith(c):
            return why
    return "not explained yet"


def table(compared: pd.DataFrame, metrics: list[tuple[str, str]]) -> str:
    """Per compared metric and case family: the rows off (5 % for counters, 10 % for time), their range, why."""
    rows = []
    for metric, label in [*metrics, ("time_s", "time (off by more than 10 %)")]:
        t = compared[(compared.metric == metric) & (compared.kind != "counter-noise")]
        if metric == "time_s":
            t = t[t.kind == "time"]
        off = t[t.rel_error.abs() > (0.10 if metric == "time_s" else 0.05)]
        for case, g in off.groupby("case"):
            n = (t.case == case).sum()
            rows.append(f"<tr><td>{html.escape(label)}</td><td>{html.escape(case)}</td><td>{len(g)}/{n}</td>"
                        f"<td>{100 * g.rel_error.min():+.0f} … {100 * g.rel_error.max():+.0f} %</td>"
                        f"<td>{html.escape(reason(metric, case))}</td></tr>")
    return ("<table><tr><th>compared</th><th>case</th><th>off</th><th>model vs measured</th><th>why</th></tr>"
            + "".join(rows) + "</table>")
