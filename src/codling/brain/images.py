"""Whether a model is sent the images attached to a prompt, and whether a provider's error refused them.

The catalog's ``images`` flag decides for the models it knows. A model it does not know (every
``openai-chat:*`` model of a local server, for one) is sent them: many such models see images, and the
provider says so plainly when one cannot. Those refusals, as OpenAI-compatible servers word them:

- OpenAI: 400 ``Invalid content type. image_url is only supported by certain models.``
- Ollama: 400 ``this model does not support image input`` (older: ``… is not a multimodal model``)
- llama.cpp's server: 500 ``Failed to parse messages: Unsupported content part type: "image_url"`` or
  ``image input is not supported - hint: … you may need to provide the mmproj``
- LM Studio: 400 ``Model does not support images. Please use a model that does.``
- vLLM: 400 ``… is not a multimodal model`` / ``… does not support multimodal inputs``
"""

from __future__ import annotations

import re

from codling.llm.catalog import ModelInfo

_REFUSAL = re.compile(
    r"image_url|input_image|image[ _-]?(input|content|part)s?\b.{0,40}\b(not supported|unsupported|not allowed)"
    r"|(does not|doesn't|do not|cannot|can't|not) (support|accept|handle|process|allow)\w* (\w+ )?"
    r"(images?|vision|multimodal|multi-modal)"
    r"|not an? (multimodal|multi-modal|vision)"
    r"|unsupported content (part )?type"
    r"|images? (input )?(is |are )?not supported",
    re.IGNORECASE,
)

_REFUSAL_STATUSES = frozenset({400, 415, 422, 500})
"""Statuses a refusal comes with (llama.cpp's server answers 500)."""


def may_see_images(model: ModelInfo) -> bool:
    """Whether ``model`` is sent images: the catalog's word for a model it knows, else yes (the provider
    refuses them plainly if the model cannot, see :func:`refuses_images`)."""
    return model.images or not model.known


def refuses_images(error: BaseException) -> bool:
    """Whether ``error`` is a provider refusing a request because it held images (an HTTP error whose
    message speaks of image, vision or multimodal input)."""
    from pydantic_ai.exceptions import ModelHTTPError

    if not isinstance(error, ModelHTTPError) or error.status_code not in _REFUSAL_STATUSES:
        return False
    return bool(_REFUSAL.search(f"{error.body} {error.message}"))
