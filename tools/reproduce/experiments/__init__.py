"""What `fedemu reproduce` runs for each paper: one module per paper (``PAPERS`` names them), each a
function of ``quick`` that gives its experiments; ``base`` holds what they share."""

from __future__ import annotations

from .base import DATA, EC2_TRACES, SCENARIOS, TRACES, VARIANTS, Experiment, only_for, variant
from .megha_2022 import megha_2022
from .megha_2023 import megha_2023
from .pigeon_2019 import pigeon_2019

PAPERS = {
    "megha-2023": ("Constraint-Aware Federated Scheduling for Data Center Workloads (IoT 2023), file 000", megha_2023),
    "megha-2022": ("Megha: Decentralized Global Fair Scheduling for Federated Clusters (workshop paper), file 002",
                   megha_2022),
    "pigeon-2019": ("Pigeon: an Effective Distributed, Hierarchical Datacenter Job Scheduler (SoCC 2019), file 001",
                    pigeon_2019),
}

__all__ = ["DATA", "EC2_TRACES", "PAPERS", "SCENARIOS", "TRACES", "VARIANTS", "Experiment", "megha_2022",
           "megha_2023", "only_for", "pigeon_2019", "variant"]
