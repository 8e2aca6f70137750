"""Models: provider-neutral messages, the `Model` ABC, and adapters: OpenAI-compatible APIs, Anthropic, local.

`LocalModel` is a GGUF model on a llama.cpp server that it starts and stops.

The adapters import their SDK when a model is created: ``import toolplan.models`` needs neither
``openai`` nor ``anthropic``.
"""

from ._anthropic import AnthropicModel as AnthropicModel
from ._infer import infer_model as infer_model
from ._local import LocalModel as LocalModel
from ._messages import AssistantMessage as AssistantMessage
from ._messages import FinishReason as FinishReason
from ._messages import ModelMessage as ModelMessage
from ._messages import ModelResponse as ModelResponse
from ._messages import ModelStreamEvent as ModelStreamEvent
from ._messages import ResponseCompleted as ResponseCompleted
from ._messages import SystemMessage as SystemMessage
from ._messages import TextDelta as TextDelta
from ._messages import ToolCall as ToolCall
from ._messages import ToolCallArgsDelta as ToolCallArgsDelta
from ._messages import ToolCallStarted as ToolCallStarted
from ._messages import ToolMessage as ToolMessage
from ._messages import ToolReturnMessage as ToolReturnMessage
from ._messages import Usage as Usage
from ._messages import UserMessage as UserMessage
from ._model import Model as Model
from ._openai import OpenAIModel as OpenAIModel
from ._retry import is_transient as is_transient
from ._settings import ForceTool as ForceTool
from ._settings import ModelSettings as ModelSettings
from ._settings import ModelSettingsLike as ModelSettingsLike
from ._settings import RetryConfig as RetryConfig
from ._settings import ToolChoice as ToolChoice
from ._spend import ModelPrice as ModelPrice
from ._spend import SpendCharge as SpendCharge
from ._spend import SpendLimits as SpendLimits
from ._spend import SpendWindow as SpendWindow

__all__ = (
    "AnthropicModel",
    "AssistantMessage",
    "FinishReason",
    "ForceTool",
    "LocalModel",
    "Model",
    "ModelMessage",
    "ModelPrice",
    "ModelResponse",
    "ModelSettings",
    "ModelSettingsLike",
    "ModelStreamEvent",
    "OpenAIModel",
    "ResponseCompleted",
    "RetryConfig",
    "SpendCharge",
    "SpendLimits",
    "SpendWindow",
    "SystemMessage",
    "TextDelta",
    "ToolCall",
    "ToolCallArgsDelta",
    "ToolCallStarted",
    "ToolChoice",
    "ToolMessage",
    "ToolReturnMessage",
    "Usage",
    "UserMessage",
    "infer_model",
    "is_transient",
)
