"""Eagle (Delgado et al., SoCC 2016): Hawk (``actors/hawk``) plus Succinct State Sharing (probes that reach a
worker with long work are rejected with the long-job scheduler's bitmap, and sent again elsewhere), Sticky
Batch Probing and a shortest-remaining-job-first queue order with a bound against starvation. ``plugin``
declares it."""
