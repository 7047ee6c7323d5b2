"""Week 2, day 2: the hand-over of a warp-specialized ring, step by step.

`handover(...)` steps a producer, the TMA unit and a consumer through the barriers (MBarrier: arrivals, tx bytes,
completed phases; try_wait.parity(P) is true when the phase of parity P has completed, i.e. when the current phase's
parity is not P). It reports "done" or "deadlock", and every read of a stage that did not hold the tile the
consumer expected (a race). `parity_schedule` is the parities the course's kernels wait on, tile by tile.
"""

from __future__ import annotations


class MBarrier:
    """An mbarrier: `count` arrivals and the announced transaction bytes complete a phase; then the next phase
    starts with the same count. try_wait(parity): has the phase of that parity completed — i.e. is the current
    (incomplete) phase's parity the other one? Before the first completion the current phase is 0, so
    try_wait(1) is already true: the phase "before" it counts as completed."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.pending = count
        self.tx = 0
        self.completed = 0  # phases completed so far; the current phase is number `completed`

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count

    def arrive(self) -> None:
        self.pending -= 1
        if self.pending < 0:
            raise RuntimeError("more arrivals than the barrier's count in one phase")
        self._maybe_complete()

    def arrive_expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes
        self.arrive()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        self._maybe_complete()

    def try_wait(self, parity: int) -> bool:
        return (self.completed & 1) != parity


def handover(stages: int, tiles: int, *, empty_parity=lambda n: (n & 1) ^ 1, full_parity=lambda n: n & 1,
             consumer_arrives: bool = True, release_before_read: bool = False, consumers: int = 2,
             tma_steps: int = 3, read_steps: int = 4, max_steps: int = 100000) -> dict:
    """Step a producer, the TMA unit and `consumers` consumer warps (each reads every tile) through a ring of
    `stages` stages with a full[s] (count 1 + tx bytes) and an empty[s] (count `consumers`) barrier.

    empty_parity(n) / full_parity(n): the parity the producer / a consumer waits on for use n of a stage (the
    course's: (n & 1) ^ 1 and n & 1). consumer_arrives=False: nobody arrives on empty. release_before_read: the
    consumer arrives on empty[s] before it reads the stage. A TMA load lands `tma_steps` steps after its issue; a
    consumer's read of a stage takes `read_steps` steps, each checking what the stage holds.

    Returns {"status": "done" | "deadlock", "steps", "wrong_reads": [(consumer, tile, what the stage held)], "log"}."""
    full = [MBarrier(1) for _ in range(stages)]
    empty = [MBarrier(consumers) for _ in range(stages)]
    stage_tile = [None] * stages      # which tile's bytes a stage holds
    in_flight: list[list] = []        # [steps left, tile]
    prod_k = 0
    cons = [{"k": 0, "reading": 0} for _ in range(consumers)]
    wrong, log = [], []
    TILE_BYTES = 1
    for step in range(max_steps):
        progressed = False
        # the TMA unit: loads land
        for f in in_flight:
            f[0] -= 1
        for f in [f for f in in_flight if f[0] <= 0]:
            in_flight.remove(f)
            s = f[1] % stages
            stage_tile[s] = f[1]
            full[s].complete_tx(TILE_BYTES)
            log.append((step, "land", f[1]))
            progressed = True
        # the producer
        if prod_k < tiles:
            s, n = prod_k % stages, prod_k // stages
            if empty[s].try_wait(empty_parity(n)):
                full[s].arrive_expect_tx(TILE_BYTES)
                in_flight.append([tma_steps, prod_k])
                log.append((step, "issue", prod_k))
                prod_k += 1
                progressed = True
        # the consumers
        for ci, c in enumerate(cons):
            k = c["k"]
            if k >= tiles:
                continue
            s, n = k % stages, k // stages
            if c["reading"] == 0:
                if full[s].try_wait(full_parity(n)):
                    c["reading"] = read_steps
                    if release_before_read and consumer_arrives:
                        empty[s].arrive()
                    progressed = True
            else:
                if stage_tile[s] != k:
                    wrong.append((ci, k, stage_tile[s]))
                c["reading"] -= 1
                progressed = True
                if c["reading"] == 0:
                    if consumer_arrives and not release_before_read:
                        empty[s].arrive()
                    c["k"] += 1
                    log.append((step, f"consumer{ci} done", k))
        if prod_k >= tiles and not in_flight and all(c["k"] >= tiles for c in cons):
            return {"status": "done", "steps": step, "wrong_reads": _dedup(wrong), "log": log}
        if not progressed and not in_flight:
            return {"status": "deadlock", "steps": step, "wrong_reads": _dedup(wrong), "log": log,
                    "producer_at": prod_k, "consumers_at": [c["k"] for c in cons]}
    return {"status": "deadlock", "steps": max_steps, "wrong_reads": _dedup(wrong), "log": log}


def _dedup(wrong):
    seen, out = set(), []
    for w in wrong:
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def parity_schedule(stages: int, tiles: int) -> list[dict]:
    """For tiles k = 0 .. tiles-1 of a block: the stage, which use of it, the parity the consumers wait on (full)
    and the parity the producer waits on (empty) — and whether that producer wait returns at once (first pass)."""
    return [{"tile": k, "stage": k % stages, "use": k // stages, "full_parity": (k // stages) & 1,
             "empty_parity": ((k // stages) & 1) ^ 1, "producer_waits": k >= stages} for k in range(tiles)]
