"""toolplan benchmarks: engine overhead, makespan, model round-trips and streamed plans.

Run ``python -m bench --help``. Results go to ``bench/results/`` (JSON per benchmark plus
``RESULTS.md``); see ``bench/README.md`` for what each contender is and how to rerun it.
"""

from __future__ import annotations
