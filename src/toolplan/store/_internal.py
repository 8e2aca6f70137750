"""What the features above the store (service, schedules, skills, planner, knowledge) may use of its internals.

They keep their own rows in the store's database, through its thread (``store.db``), with its tables
and codec; nothing else of the store's private modules is theirs to import.
"""

from ._claim import insert_queued as insert_queued
from ._codec import decode as decode
from ._codec import encode as encode
from ._codec import plan_hash as plan_hash
from ._reads import info_of as info_of
from ._reads import load_info as load_info
from ._records import not_found as not_found
from ._records import plan_id as plan_id
from ._records import plan_row as plan_row
from ._schema import api_keys as api_keys
from ._schema import chunks as chunks
from ._schema import events as events
from ._schema import executions as executions
from ._schema import idempotency as idempotency
from ._schema import plans as plans
from ._schema import requests as requests
from ._schema import schedule_firings as schedule_firings
from ._schema import schedules as schedules
from ._schema import skills as skills
