"""Playback of a run for a lecture: the pace of the animation and the history scrubber.

* **Pace** (``frame_ms``, milliseconds per iteration): visible beside the traces instead of buried under "Solver
  and grid"; 0 runs as fast as the server computes, 1000 shows one iteration a second.
* **Replay** (the history scrubber): after a run, or while it is paused, a slider over the iterations of the run
  puts iteration k back on screen (:meth:`app.runner.FramePump.show_iteration`): the heatmap (its field from the
  run's bounded field buffer, :class:`app.runner.FieldBuffer`), the cursor on the traces and everything else that
  follows ``session.record``.  ◀ and ▶ step one iteration, to walk through an a_j switch; the slider freezes on a
  plateau.  While the run plays, the slider follows the latest iteration and is disabled.
"""
from __future__ import annotations

import panel as pn
import param

from ..session import BFTSession
from ..transport import after_user_action, user_action


class Playback(pn.viewable.Viewer):
    session = param.ClassSelector(class_=BFTSession)

    def __init__(self, **params):
        super().__init__(**params)
        s = self.session
        self.pace = pn.widgets.IntSlider.from_param(s.param.frame_ms, label="pace (ms)", step=10,
                                                    width=170, css_classes=["bft-pace"], margin=(0, 10))
        self.scrubber = pn.widgets.IntSlider(label="replay", start=0, end=1, value=0, step=1, width=170,
                                             disabled=True, css_classes=["bft-scrubber"], margin=(0, 5))
        self.back = pn.widgets.Button(label="◀", width=36, disabled=True, css_classes=["bft-scrub-back"],
                                      margin=(14, 2, 0, 2))
        self.forward = pn.widgets.Button(label="▶", width=36, disabled=True, css_classes=["bft-scrub-forward"],
                                         margin=(14, 2, 0, 2))
        self.back.on_click(user_action(lambda _: self._nudge(-1)))
        self.forward.on_click(user_action(lambda _: self._nudge(+1)))
        self._syncing = False
        self.scrubber.param.watch(self._on_scrub, "value")
        s.param.watch(self._on_run_change, ["history", "running"])
        self._follow()

    def _on_run_change(self, *_):
        # within a click's message the row would cost the answer 1-6 ms of server time (three widgets toggled,
        # the range reset): it follows in the next message instead
        if not after_user_action(self.session.pump.doc, self._follow):
            self._follow()

    def _nudge(self, delta: int):
        w = self.scrubber
        w.value = min(max(w.value + delta, w.start), w.end)

    def _on_scrub(self, event):
        if self._syncing:
            return
        self.session.pump.show_iteration(int(event.new))

    def _follow(self):
        """Follow the run: the range is the run's iterations; the value the latest while it plays."""
        s, w = self.session, self.scrubber
        hist = s.history
        last = int(hist[-1].iteration) if hist else 0
        first = int(hist[0].iteration) if hist else 0
        idle = not s.running and len(hist) > 1
        self._syncing = True
        try:
            if w.start != first:
                w.start = first
            end = max(last, first + 1)
            if w.end != end:
                w.end = end
            if s.running or not idle or w.disabled or w.value > last:  # following the run until it stops
                if w.value != last:
                    w.value = last
            for widget in (w, self.back, self.forward):
                if widget.disabled == idle:
                    widget.disabled = not idle
        finally:
            self._syncing = False

    def __panel__(self):
        # at most the side column's width at 1280×720 (420 px, its scroll bar included); narrower, it wraps: as a Row
        # of 470 px it widened every plot of the column past the window's edge, their toolbars cut off
        return pn.FlexBox(self.pace, self.scrubber, self.back, self.forward, flex_wrap="wrap",
                          sizing_mode="stretch_width", styles={"min-width": "0"})
