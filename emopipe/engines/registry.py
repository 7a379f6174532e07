"""Engine backends by name; each backend's module (and onnxruntime) is imported only when chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from emopipe.registry import Registry

if TYPE_CHECKING:
    from emopipe.engines.base import Engine, EngineOptions
    from emopipe.model.emonet import EmoNet


class EngineFactory(Protocol):
    def __call__(self, model: EmoNet, options: EngineOptions, **kwargs: Any) -> Engine: ...


BACKENDS: Registry[EngineFactory] = Registry("backend", {
    "torch": "emopipe.engines.torch_engine:create",
    "onnxruntime": "emopipe.engines.onnxruntime_engine:create",
})


def create_engine(backend: str, model: EmoNet, options: EngineOptions, **kwargs: Any) -> Engine:
    """The engine for ``backend`` (``torch`` or ``onnxruntime``); kwargs are backend-specific."""
    return BACKENDS.get(backend)(model, options, **kwargs)
