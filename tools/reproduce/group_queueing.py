"""The analytic model of a two-layer scheduler's groups (the Pigeon paper, SoCC 2019, section 3): each group
of ``nw`` workers is an M/M/nw queue fed by its master, so Erlang C gives a task's chance not to queue
(Eq. 1) and its mean queueing time (Eq. 2); a job of ``fanout`` tasks then does not queue with
P_task(0)^F when its tasks are equally long (Eq. 3), or about P_task(0) e^(-Tq/Te) when task times are
exponential (Eq. 6). Eq. 4 is the batch-probing comparison (2F probes on workers each busy with
probability rho, the job placed without queueing when F of them are idle).

Pure functions of the model's parameters; ``load`` is the worker utilisation rho = lambda_t Te / Nw.
Erlang C comes from the Erlang B recursion, which stays finite for any group size (the factorials of
Eq. 1 overflow past about 170 workers)."""

from __future__ import annotations

import math


def _check(nw: int, load: float) -> None:
    if not (isinstance(nw, int) and nw >= 1):
        raise ValueError(f"group size {nw!r}: expected a whole number >= 1")
    if not 0 <= load < 1:
        raise ValueError(f"load {load!r}: expected 0 <= load < 1 (the queue is unstable at 1)")


def erlang_c(nw: int, load: float) -> float:
    """The probability that a task arriving at an M/M/nw queue with utilisation ``load`` must wait."""
    _check(nw, load)
    a = nw * load  # offered load in Erlangs
    b = 1.0  # Erlang B with 0 servers
    for k in range(1, nw + 1):
        b = a * b / (k + a * b)
    return b / (1 - load * (1 - b))


def task_zero_queue(nw: int, load: float) -> float:
    """Eq. 1: P_task(0), the chance that a task finds an idle worker in its group."""
    return 1 - erlang_c(nw, load)


def task_wait(nw: int, load: float, te: float) -> float:
    """Eq. 2: T_q, a task's mean queueing time, (1 - P_task(0)) / (Nw/Te - lambda_t), in Te's unit."""
    return erlang_c(nw, load) * te / (nw * (1 - load))


def job_zero_queue_equal(nw: int, load: float, fanout: int) -> float:
    """Eq. 3: a job of ``fanout`` equally long tasks, each in another group, does not queue."""
    return task_zero_queue(nw, load) ** fanout


def job_zero_queue_exp(nw: int, load: float) -> float:
    """Eq. 6: a job of exponential tasks does not queue when its longest task finds an idle worker and
    outlasts the second longest by more than T_q: P_task(0) e^(-T_q/T_e) (T_q/T_e does not depend on T_e)."""
    return task_zero_queue(nw, load) * math.exp(-task_wait(nw, load, 1.0))


def probe_job_zero_queue(load: float, fanout: int) -> float:
    """Eq. 4: a job of ``fanout`` tasks sends 2F probes to workers each busy with probability ``load`` and
    does not queue when at least F probes find an idle worker: sum over i = F..2F of C(2F, i) (1-rho)^i
    rho^(2F-i)."""
    _check(1, load)
    n = 2 * fanout
    if load == 0:
        return 1.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log1p(-load)
            + (n - i) * math.log(load) for i in range(fanout, n + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def drop_load(curve, level: float, lo: float = 0.0, hi: float = 0.999, tol: float = 1e-6) -> float:
    """The load at which a falling curve (a function of the load) crosses ``level``, by bisection: where
    Fig. 2's probabilities 'start to drop' (a level near 1) or reach one-half."""
    if curve(lo) < level:
        return lo
    if curve(hi) >= level:
        return hi
    while hi - lo > tol:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if curve(mid) >= level else (lo, mid)
    return (lo + hi) / 2


def curves(loads=(0.4, 0.45, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)) -> str:
    """The analysis over a load range as a Markdown table: Figs. 3-4's Eq. 6 and Eq. 2 (groups of 50, 100
    and 200, T_e = 100 ms) and Fig. 2's Eq. 3 (groups of 100 and 200) and Eq. 4 (F = 100)."""
    head = ["load"] + [f"Eq. 6, Nw={n}" for n in (50, 100, 200)] + [f"Eq. 2 ms, Nw={n}" for n in (50, 100, 200)] \
        + ["Eq. 3, Nw=100, F=100", "Eq. 3, Nw=200, F=100", "Eq. 4, F=100"]
    rows = [[f"{r:g}"] + [f"{job_zero_queue_exp(n, r):.3f}" for n in (50, 100, 200)]
            + [f"{task_wait(n, r, 0.1) * 1000:.3f}" for n in (50, 100, 200)]
            + [f"{job_zero_queue_equal(n, r, 100):.3f}" for n in (100, 200)] + [f"{probe_job_zero_queue(r, 100):.3f}"]
            for r in loads]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |"
                                                                                   for r in rows])


if __name__ == "__main__":
    print(curves())
