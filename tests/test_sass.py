"""SASS listing parser and the instruction estimate, on a hand-written listing."""

import pytest

from perfmodel.memory import Access, Launch, analyse
from perfmodel.models.issue import warp_instructions
from perfmodel.sass import parse

LISTING = """
        Function : toy
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0020*/                   IADD3 R4, R4, 0x1, RZ ;
        /*0030*/                   LDS R5, [R4] ;
        /*0040*/                   FADD R6, R6, R5 ;
        /*0050*/               @P0 BRA 0x20 ;
        /*0060*/                   STG.E desc[UR4][R2.64], R6 ;
        /*0070*/                   EXIT ;
        /*0080*/                   BRA 0x80;
        /*0090*/                   NOP;
"""


def test_parse_finds_the_loop_and_its_memory_instructions():
    fn = parse(LISTING)["toy"]
    assert fn.instructions == 8  # the padding after the last EXIT never runs
    body, loop = fn.regions
    assert (body.depth, body.instructions, body.kinds) == (0, 4, {"global_ld": 1, "global_st": 1})
    assert (loop.start, loop.end, loop.depth, loop.instructions, loop.kinds) == (0x20, 0x50, 1, 4,
                                                                                 {"shared_ld": 1})


def test_loop_runs_as_often_as_its_memory_instructions_say():
    launch = Launch(block=(64, 1, 1), grid=(10, 1, 1), loops={"k": 7})
    accesses = [Access("x", "global", "bx*64 + tx"), Access("s", "shared", "tx + 64*k", loops=("k",)),
                Access("y", "global", "bx*64 + tx", store=True)]
    counts = [analyse(a, launch) for a in accesses]
    got = warp_instructions(parse(LISTING)["toy"], accesses, counts, launch)
    warps = 20
    assert got.warp_instructions == warps * 4 + warps * 7 * 4
    assert got.memory_instructions == warps * (1 + 7 + 1)


BARRIERS = """
        Function : rounds
        /*0000*/                   LDG.E R2, desc[UR4][R2.64] ;
        /*0010*/                   STS [R4], R2 ;
        /*0020*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0030*/                   LDS R5, [R4] ;
        /*0040*/                   LDG.E R6, desc[UR4][R2.64+0x80] ;
        /*0050*/                   FFMA R7, R5, R5, R7 ;
        /*0060*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0070*/                   LDG.E R8, desc[UR4][R2.64+0x100] ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0090*/                   EXIT ;
"""


def test_loads_in_work_are_those_after_a_barriers_shared_loads():
    """A global load after a barrier and a shared load, before the next barrier, is a later round's load
    the compiler moved into this round's work; one right after a barrier (no shared load yet) is not."""
    assert (parse(BARRIERS)["rounds"].loads_in_work, parse(BARRIERS)["rounds"].barriers) == (1, 3)
    assert parse(LISTING)["toy"].loads_in_work == 0  # no barrier
    assert parse(LISTING)["toy"].hoisted_share == 0.0


def test_the_compiler_moves_coarsened_matmuls_later_loads_into_the_work():
    """The recorded H200 SASS (cuobjdump of the suite's build): COARSE c issues its c - 1 later B tiles'
    loads inside the rounds before them (the unrolled c loop); TILE 32, COARSE 1 and the barrier probes,
    whose round loop is not unrolled, load right after the barrier."""
    from perfmodel.sass import functions

    fns = functions("h200")
    if not fns:
        pytest.skip("no SASS recorded for the H200")
    for coarse in (1, 2, 4, 8):
        fn = fns[f"matmul_coarsened_32_{coarse}"]
        assert (fn.loads_in_work, fn.barriers) == (coarse - 1, 2 * coarse)  # two barriers a round
        assert fn.hoisted_share == (coarse - 1) / coarse  # all but the first round's load
    for name in ("matmul_tiled_16", "matmul_tiled_32", "barrier_rounds_0", "barrier_rounds_32"):
        assert fns[name].loads_in_work == 0, name
