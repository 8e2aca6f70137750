"""What other packages may use of the model layer's internals.

The test models: messages, streaming, the request guard. The agent and the planner: the spend meter.

The layering test refuses any other import of a private module from outside the package.
"""

from __future__ import annotations

from ._guard import set_model_requests_allowed as set_model_requests_allowed
from ._local import SMOLLM2_ALIAS as SMOLLM2_ALIAS
from ._local import LlamaServerProcess as LlamaServerProcess
from ._local import find_smollm2_gguf as find_smollm2_gguf
from ._messages import approximate_tokens as approximate_tokens
from ._messages import message_text as message_text
from ._spend import SpendMeter as SpendMeter
from ._streaming import StreamBuilder as StreamBuilder
from ._streaming import response_events as response_events
