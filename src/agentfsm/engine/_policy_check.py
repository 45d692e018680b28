"""Checking what is given as policies: each implements a hook, none misspells one."""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Iterable

from ._errors import PolicyVerdictError

__all__ = ["HOOK_NAMES", "call_hint", "check_policies", "hooks_of", "policy_name"]

HOOK_NAMES = (
    "turn_budget",
    "check_turn",
    "should_compress",
    "compress",
    "shape_request",
    "shape_reply",
    "on_llm_end",
    "on_tool_result",
    "on_turn_end",
    "check_final",
    "shape_outcome",
)
"""Every hook name, in the order the machine consults them."""


def policy_name(policy: object) -> str:
    """The name a policy is reported under: its ``name`` attribute, else its class name."""
    name = getattr(policy, "name", None)
    return name if isinstance(name, str) else type(policy).__name__


def _one_edit_apart(a: str, b: str) -> bool:
    """Whether ``a`` becomes ``b`` by one insertion, deletion, substitution or swap of
    neighbours."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        i, j = diff[0], diff[-1]
        return len(diff) == 2 and j == i + 1 and a[i] == b[j] and a[j] == b[i]
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


_CLASS_NAMES: weakref.WeakKeyDictionary[type, tuple[str, ...]] = weakref.WeakKeyDictionary()


def _class_names(cls: type) -> tuple[str, ...]:
    """A class's public attribute names (listed once per class)."""
    names = _CLASS_NAMES.get(cls)
    if names is None:
        names = _CLASS_NAMES[cls] = tuple(n for n in dir(cls) if not n.startswith("_"))
    return names


@functools.lru_cache(maxsize=4096)
def _near_hook(name: str) -> str | None:
    """The hook ``name`` misspells (one edit away), if any."""
    if name.startswith("_") or name in HOOK_NAMES:
        return None
    return next((hook for hook in HOOK_NAMES if _one_edit_apart(name, hook)), None)


def call_hint(factory: object) -> str:
    """How to call ``factory`` (a class or function given where its result was meant):
    ``wrap_up()`` when it takes no required argument, else ``tool_called(...)``."""
    name = getattr(factory, "__name__", None) or type(factory).__name__
    try:
        inspect.signature(factory).bind()  # type: ignore[arg-type]
    except TypeError:
        return f"{name}(...)"
    except ValueError:  # no signature to read (some builtins)
        return f"{name}(...)"
    return f"{name}()"


def _unbound_hooks(cls: type) -> bool:
    """Whether ``cls`` has a hook that is a plain function: a method its instances get."""
    return any(inspect.isfunction(inspect.getattr_static(cls, hook, None)) for hook in HOOK_NAMES)


def hooks_of(policy: object) -> list[str]:
    """The hooks ``policy`` implements (``compress`` with ``should_compress``)."""
    return [hook for hook in HOOK_NAMES if hook != "compress" and hasattr(policy, hook)] + (
        ["compress"] if hasattr(policy, "should_compress") else []
    )


def _not_a_policy_hint(thing: object) -> str:
    """What was probably meant instead of ``thing``, which implements no hook."""
    if inspect.isfunction(thing) or isinstance(thing, type):
        return f"; did you mean {call_hint(thing)}?"
    if callable(thing) and not isinstance(thing, functools.partial):
        # A callable instance, most likely a stop condition given as a policy.
        return f"; did you mean stop_when({thing!r})?"
    return ""


def check_policies(policies: object) -> tuple[object, ...]:
    """The policies as a tuple, after checking each implements a hook, and none has a
    method one letter off a hook's name.

    Raises:
        TypeError: naming the offending object (and the hook it nearly named).
    """
    if isinstance(policies, (str, bytes)) or not isinstance(policies, Iterable):
        raise TypeError(f"policies must be a sequence of policy objects, got {policies!r}")
    checked = tuple(policies)
    for policy in checked:
        if isinstance(policy, type) and _unbound_hooks(policy):
            raise TypeError(
                f"{policy.__name__} is a policy class, not a policy: did you mean "
                f"{call_hint(policy)}?"
            )
        instance_names = getattr(policy, "__dict__", None)
        for attr in (*_class_names(type(policy)), *(instance_names or ())):
            hook = _near_hook(attr)
            if hook is not None:
                raise TypeError(
                    f"policy {policy_name(policy)}: {attr!r} is not a hook; did you "
                    f"mean {hook!r}? (hooks: {', '.join(HOOK_NAMES)})"
                )
        hooks = hooks_of(policy)
        if not hooks:
            raise TypeError(
                f"{policy!r} ({type(policy).__name__}) is not a policy: it implements none of "
                f"the hooks {', '.join(HOOK_NAMES)}{_not_a_policy_hint(policy)}"
            )
        if hasattr(policy, "should_compress") != hasattr(policy, "compress"):
            raise TypeError(
                f"policy {policy_name(policy)}: a compressor implements both "
                "should_compress and compress"
            )
        if hasattr(policy, "turn_budget"):
            budget = policy.turn_budget
            if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
                raise PolicyVerdictError(policy_name(policy), "turn_budget", budget, "an int >= 1")
        for hook in hooks:
            if hook != "turn_budget" and not callable(getattr(policy, hook)):
                raise TypeError(f"policy {policy_name(policy)}: {hook} is not callable")
    return checked
