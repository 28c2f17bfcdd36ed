"""The outcome vocabulary: what each action and each handler outcome means to the views, in one table.

The runtime produces :class:`~nbkit.runtime.settle.Action` values and handler outcomes; the timeline's steps,
the plots, the notebook Session and the run summary read what they mean here (does it write a copy, a dead
letter; how does a message's lane end; what colour and marker is that end; how is it counted), instead of
each branching on ``Action.X``. A new action or outcome is a row here beside the rule that produces it.

Examples
--------
>>> from nbkit.runtime.settle import Action
>>> from nbkit.runtime.vocabulary import ACTION_TERMS, END_STATES, STEP_STATES
>>> ACTION_TERMS[Action.DELAYED_COPY].copies, ACTION_TERMS[Action.DEAD_LETTER].end
(True, 'dead-letter')
>>> STEP_STATES["dead-letter"].colour, END_STATES[:3]
('C3', ('handled', 'dropped', 'dead-letter'))
"""

from __future__ import annotations

from dataclasses import dataclass

from nbkit.runtime.settle import Action

__all__ = [
    "ACTION_TERMS",
    "COPY_ACTIONS",
    "END_STATES",
    "OUTCOME_ENDS",
    "STEP_STATES",
    "ActionTerms",
    "StepState",
]


@dataclass(frozen=True, slots=True)
class ActionTerms:
    """What one action means: what it writes, how a lane ends on it, how a run summary counts it.

    ``copies``: it writes (or schedules) a retry copy, delivered again as the next attempt; ``copy_now``: that
    copy is written at once (its delay reads 0 s); ``dead_letter``: it writes a copy to the dead-letter key.
    ``end``: the step state (:data:`STEP_STATES`) of a lane's last delivery with this action, or None when
    something else decides it (the copy's fate, or the handler's outcome: :data:`OUTCOME_ENDS`). ``counter``:
    the :class:`~nbkit.runtime.run_summary.RunCounts` field that counts it, said as ``said`` (one, many; ``{n}``
    is the count) in the summary line, left out when 0 unless ``always_said``.
    """

    action: Action
    copies: bool = False
    copy_now: bool = False
    dead_letter: bool = False
    end: str | None = None
    counter: str | None = None
    said: tuple[str, str] = ("", "")
    always_said: bool = False


#: Every action's terms by its name (an :class:`~nbkit.runtime.settle.Action` finds its own), in the order a run
#: summary says them.
ACTION_TERMS: dict[str, ActionTerms] = {
    t.action.value: t
    for t in (
        ActionTerms(
            Action.COPY,
            copies=True,
            copy_now=True,
            counter="copies",
            said=("{n} copy published", "{n} copies published"),
            always_said=True,
        ),
        ActionTerms(Action.DELAYED_COPY, copies=True, counter="copies"),
        ActionTerms(
            Action.DEAD_LETTER,
            dead_letter=True,
            end="dead-letter",
            counter="dead_letters",
            said=("{n} dead letter", "{n} dead letters"),
        ),
        ActionTerms(Action.REJECTED, end="rejected", counter="rejected", said=("{n} rejected at the cap",) * 2),
        # unsupported: ack/nack failed as unsupported; counted when a retry() requeues nothing (the message is gone)
        ActionTerms(Action.UNSUPPORTED, counter="requeued_nothing", said=("{n} retry() with no copy",) * 2),
    )
}
#: The actions that write (or schedule) a retry copy.
COPY_ACTIONS = frozenset(a for a, t in ACTION_TERMS.items() if t.copies)
#: How a lane ends when its last action ends nothing itself (``unsupported``): by the handler's outcome (a handler
#: that raised counts as ``drop``; a ``retry()`` that requeued nothing dropped the message).
OUTCOME_ENDS = {"ack": "handled", "drop": "dropped", "retry": "dropped", "retry_after": "dropped"}


@dataclass(frozen=True, slots=True)
class StepState:
    """One state of a delivery on the timeline, and how it is drawn.

    ``end``: a lane can end on it (all but ``retried``, whose copy is the lane's next delivery); ``legend``, ``marker``
    and ``colour`` (a matplotlib colour key) draw that end, ``hollow`` ones without fill; ``label`` is the lane's
    right-hand label, ``label_to`` the same with ``{destination}`` when the step names one. ``copy``: a retry delay
    ending here is drawn ``"written"`` (solid) or ``"unwritten"`` (dashed), "" when no delay ends here.
    """

    name: str
    legend: str = ""
    marker: str = ""
    colour: str = ""
    hollow: bool = False
    label: str = ""
    label_to: str = ""
    copy: str = ""
    end: bool = True

    def right_label(self, destination: str) -> str:
        """The lane's right-hand label for this end (naming ``destination`` where the state says one)."""
        return self.label_to.format(destination=destination) if destination and self.label_to else self.label


#: Every state a timeline step can have, by name: "retried", then the ends in legend order.
STEP_STATES: dict[str, StepState] = {
    s.name: s
    for s in (
        StepState("retried", copy="written", end=False),
        # a tick, not a rotated X: told apart from a dead letter without colour
        StepState("handled", "handled (ack)", "$\\checkmark$", "C2", label="handled"),
        StepState("dropped", "dropped (drop or exception)", "v", "0.35", label="dropped"),
        StepState("dead-letter", "dead letter", "X", "C3", label="dead letter", label_to="dead letter → {destination}"),
        StepState("rejected", "rejected (no dead-letter key)", "s", "k", label="rejected"),
        StepState("lost", "copy lost (crash or shutdown)", "x", "C4", label="copy lost", copy="unwritten"),
        StepState(
            "waiting",
            "copy written, not yet delivered",
            ">",
            "0.5",
            hollow=True,
            label="copy waiting",
            label_to="copy waiting in {destination}",
            copy="written",
        ),
        StepState(
            "copy-out",
            "copy written to stdout (next stage)",
            ">",
            "C1",
            hollow=True,
            label="copy written",
            label_to="copy out → {destination}",
            copy="written",
        ),
        StepState("pending", "copy due, not yet written", "o", "0.5", hollow=True, label="copy due", copy="unwritten"),
        StepState(
            "no further copy",
            "no further copy (handled, dropped, rejected or lost)",
            "|",
            "0.35",
            label="no further copy",
        ),
    )
}
#: How a lane can end: the names of the :data:`STEP_STATES` that end one, in legend order.
END_STATES = tuple(name for name, s in STEP_STATES.items() if s.end)
