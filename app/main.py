"""Entry point of `panel serve app`: builds one session's layout and marks it servable; nothing else.

`panel serve` executes this file as a script; ``app`` and ``bftcore`` are imported as the installed packages
(``pip install -e .`` from the repository), so the app serves from any working directory.
"""
import sys

# Panel's Location turns every all-digit value of a link into an int() when the page is built, before any code of
# ours sees the link; Python refuses more than 4 300 digits with an exception inside Panel, and the page never
# finished.  The request line is bounded by the HTTP server's header limit (64 KiB) and int() of 65 000 digits takes
# about 20 ms here, so the served app allows that many; app.views.share.read_url then refuses such a value by name.
if 0 < sys.get_int_max_str_digits() < 70_000:
    sys.set_int_max_str_digits(70_000)

import panel as pn  # noqa: E402
from bokeh.models import ColorBar, CustomJS  # noqa: E402

from app.configuration import DEFAULT_FONT, MAX_POINTS  # noqa: E402
from app.session import BFTSession  # noqa: E402
from app.transport import ARIA_JS, install_browser_patches, user_action  # noqa: E402
from app.views.byy import BYYView  # noqa: E402
from app.views.canvas import DataCanvas  # noqa: E402
from app.views.common import ARIA, LATER_ARIA, BuiltWhenShown, LiveText  # noqa: E402
from app.views.controls import Controls  # noqa: E402
from app.views.evidence import EvidenceView  # noqa: E402
from app.views.image_completion import ImageCompletionView  # noqa: E402
from app.views.information import InformationView  # noqa: E402
from app.views.learning import LearningView  # noqa: E402
from app.views.local import LocalStrip  # noqa: E402
from app.views.metastability import BranchDiagram, MetastabilityView  # noqa: E402
from app.views.mixing import MixingView  # noqa: E402
from app.views.overfitting import OverfittingView  # noqa: E402
from app.views.presets import PresetsView  # noqa: E402
from app.views.prior import PriorView  # noqa: E402
from app.views.regression import RegressionView  # noqa: E402
from app.views.share import SharePanel  # noqa: E402
from app.views.sweep import SweepView  # noqa: E402
from app.views.traces import TracesView  # noqa: E402

ABOUT = f"""
### Bayesian field theory, live
This dashboard solves J. C. Lemm's Bayesian field theory for the conditional density p(y|x) on a grid
(or for a regression function), with Gaussian process priors and mixtures of them, and shows every
iteration of the solver. Click the canvas to add data, move a slider, or pick a preset.

* **Canvas**: the learned density, data on top; the click mode switches between adding and removing points.
* **Traces**: energy, training and test error per iteration; overfitting and plateaus are marked.
* **Mixing**: the weight of each prior component (template) and its history.
* **β sweep**: follow the stationary mixing coefficient over the mixture temperature.

Each session is independent; at most {MAX_POINTS} points per session. The configuration you download is
the JSON document of the command line, so `python -m bftcore fit config.json` reproduces the run.
"""


#: Shown when the page loses its server (its session is gone with it); the link still holds the whole setup.
DISCONNECT_NOTIFICATION = "Connection to the server was lost: reload the page (the link keeps your setup)."

#: The two layouts (issue 28), as CSS variables on <body> that the boxes' inline styles read (custom properties
#: reach inside every shadow root, where a page-level rule does not): the **presenter** layout, for a projector
#: (1280x720, 1920x1080) or any landscape window at least 1200 px wide, a narrow sidebar of controls, the hero as
#: large as the window allows (its equation and keyboard form scroll under it), and beside it the live plots as
#: tiles two abreast; the **workbench**, the earlier layout, one column of plots beside the hero.  ``?layout=auto``
#: (the default) chooses by the window (:data:`PRESENTER_QUERY`), ``presenter`` or ``workbench`` force one (a class
#: on <body>, set by the layout control's callback).  The header and the message line have fixed heights (a message
#: never moves the plots); the dark high-contrast theme is a class on <body>.
PRESENTER_QUERY = "(min-width: 1200px) and (min-aspect-ratio: 3/2)"
WORKBENCH_VARS = """--bft-sidebar: 0 0 320px; --bft-hero: 3 1 420px; --bft-side: 2 1 340px; --bft-tile: 1 1 100%;
  --bft-plot-min: 260px;"""
PRESENTER_VARS = """--bft-sidebar: 0 0 300px; --bft-hero: 3 1 540px; --bft-side: 2 1 420px; --bft-tile: 1 1 200px;
  --bft-plot-min: calc(100vh - 130px);"""
CSS = f"""
body {{ {WORKBENCH_VARS} font-size: var(--bft-font, 16px); }}
@media {PRESENTER_QUERY} {{ body:not(.bft-workbench) {{ {PRESENTER_VARS} }} }}
body.bft-presenter {{ {PRESENTER_VARS} }}
body.bft-dark {{ background: #000 !important; color: #fff !important; }}
body.bft-dark .bk-panel-models-markup-HTML, body.bft-dark .card-header {{ color: #fff !important; }}
body.bft-dark .card-header {{ background: #222 !important; }}
html, body {{ overflow-x: hidden; }}
"""
HERO_STYLE = {"flex": "var(--bft-hero)", "min-width": "min(420px, 100%)", "height": "calc(100vh - 110px)",
              "min-height": "360px", "overflow-y": "auto", "overflow-x": "hidden"}
SIDE_STYLE = {"flex": "var(--bft-side)", "min-width": "min(340px, 100%)", "height": "calc(100vh - 110px)",
              "overflow-y": "auto", "overflow-x": "hidden", "align-content": "flex-start"}
SIDEBAR_STYLE = {"flex": "var(--bft-sidebar)", "max-width": "100%", "height": "calc(100vh - 56px)",
                 "overflow-y": "auto", "overflow-x": "hidden"}
#: A tile of the side: two abreast in the presenter layout, one per row on the workbench.
TILE_STYLE = {"flex": "var(--bft-tile)", "min-width": "0"}
#: The layout control's callback: the body's class says which layout was chosen ("auto": none, the window decides).
LAYOUT_JS = """
document.body.classList.toggle('bft-presenter', cb_obj.value === 'presenter');
document.body.classList.toggle('bft-workbench', cb_obj.value === 'workbench');
window.dispatchEvent(new Event('resize'));
"""
#: The layout button (and its keyboard shortcut): the other layout than the one on screen.
LAYOUT_TOGGLE_JS = """
const b = document.body.classList;
const presenter = b.contains('bft-presenter') || (!b.contains('bft-workbench') && matchMedia(query).matches);
select.value = presenter ? 'workbench' : 'presenter';
"""
#: The font size control's callback: the page's text (the plots' fonts are set by the server, :func:`apply_fonts`).
FONT_JS = """
document.body.style.setProperty('--bft-font', cb_obj.value + 'px');
if (!window.__bftFontSheet) {
  // every component draws its text in its own shadow root at Bokeh's --bokeh-font-size (12 px) or a size of its
  // own: a sheet adopted by each root (and by those made later: app.transport re-applies it after each patch)
  // sets them all to the size control's value
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(':host { --bokeh-font-size: var(--bft-font, 16px) !important; '
                    + 'font-size: var(--bft-font, 16px) !important; }');
  window.__bftFontSheet = sheet;
  window.__bftApplyFont = () => {
    const walk = (root) => { for (const el of root.querySelectorAll('*')) { const r = el.shadowRoot; if (!r) continue;
      if (!r.adoptedStyleSheets.includes(sheet)) r.adoptedStyleSheets = [...r.adoptedStyleSheets, sheet];
      walk(r); } };
    walk(document);
  };
}
window.__bftApplyFont();
"""
#: A column of fixed height that scrolls: its children keep their own heights instead of being squeezed into it or
#: capped at its height (BokehJS gives every element max-height: 100%, and a flex column shrinks its children: the
#: controls drew over the share panel below them, and a click on "Solver and grid" hit the share panel).
NO_SHRINK = [":host > *, * { flex-shrink: 0; max-height: none; }"]
#: The dark theme inside the components: each of them has its own shadow root where Panel's theme sets the text
#: colour (a class on <body> does not reach it), so a shared stylesheet is adopted by every shadow root of the page
#: while the theme is on (and by those made later: :data:`app.views.common` re-applies it after each patch).
DARK_SHADOW_CSS = """
:host { --panel-on-background-color: #ffffff; --panel-background-color: #000000; --panel-surface-color: #1a1a1a;
        --panel-on-surface-color: #ffffff; --panel-border-color: #666666; color: #ffffff; }
h1, h2, h3, h4, p, li, label, strong, em, .bk-input-group, .markdown { color: #ffffff; }
.card-header { background: #222222 !important; color: #ffffff !important; }
:host(.card-header-row) { background-color: #222222 !important; }
.bk-tab { color: #ffffff; background: #000000; } .bk-tab.bk-active { color: #ffffff; background: #333333; }
"""
DARK_JS = """
const on = cb_obj.active;
document.body.classList.toggle('bft-dark', on);
if (!window.__bftDarkSheet) {
  const sheet = new CSSStyleSheet(); sheet.replaceSync(css); window.__bftDarkSheet = sheet;
}
window.__bftDark = on;
window.__bftApplyDark = () => {
  const sheet = window.__bftDarkSheet;
  const walk = (root) => { for (const el of root.querySelectorAll('*')) { const r = el.shadowRoot; if (!r) continue;
    const has = r.adoptedStyleSheets.includes(sheet);
    if (window.__bftDark && !has) r.adoptedStyleSheets = [...r.adoptedStyleSheets, sheet];
    else if (!window.__bftDark && has) r.adoptedStyleSheets = r.adoptedStyleSheets.filter((s) => s !== sheet);
    walk(r); } };
  walk(document);
};
window.__bftApplyDark();
"""
#: Colours of the dark high-contrast theme for every Bokeh plot of the page, and of the light one.
DARK = dict(bg="#000000", fg="#ffffff", grid="#444444", legend="#111111")
LIGHT = dict(bg="#ffffff", fg="#222222", grid="#e5e5e5", legend="#ffffff")

#: At the page's start: the link's layout, font size and theme (their controls' callbacks run on a change only).
INITIAL_JS = ("{ const cb_obj = {value: layout};" + LAYOUT_JS + "}"
              "{ const cb_obj = {value: size};" + FONT_JS + "}"
              "if (dark) { const cb_obj = {active: true};" + DARK_JS + "}")

# a session lost with its server (a worker that died, a restart): say so, and how to get the setup back
pn.extension("katex", raw_css=[CSS], disconnect_notification=DISCONNECT_NOTIFICATION)



def apply_theme(doc, dark: bool) -> None:
    """Colour every Bokeh plot of the document for the theme (the canvas' white points stay white)."""
    from bokeh.models import Plot
    c = DARK if dark else LIGHT
    for fig in doc.select({"type": Plot}):
        fig.update(background_fill_color=c["bg"], border_fill_color=c["bg"], outline_line_color=c["grid"])
        if fig.title is not None:
            fig.title.text_color = c["fg"]
        for ax in fig.axis:
            ax.update(axis_label_text_color=c["fg"], major_label_text_color=c["fg"], axis_line_color=c["fg"],
                      major_tick_line_color=c["fg"], minor_tick_line_color=c["fg"])
        for gr in fig.grid:
            gr.grid_line_color = c["grid"]
        for leg in fig.legend:
            # an entry of a hidden curve is drawn under its "inactive" veil: white, it was a grey box on black
            leg.update(background_fill_color=c["legend"], label_text_color=c["fg"], border_line_color=c["grid"],
                       inactive_fill_color=c["legend"])
        for cb in fig.select({"type": ColorBar}):
            cb.update(background_fill_color=c["bg"], major_label_text_color=c["fg"], title_text_color=c["fg"])


def apply_fonts(doc, size: int) -> None:
    """Every Bokeh plot's text at ``size`` px (titles, axes, ticks, legends, colour bars): the size control."""
    from bokeh.models import Plot
    px = f"{int(size)}px"
    for fig in doc.select({"type": Plot}):
        if fig.title is not None:
            fig.title.text_font_size = px
        for ax in fig.axis:
            ax.update(axis_label_text_font_size=px, major_label_text_font_size=px)
        for leg in fig.legend:
            leg.label_text_font_size = px
        for cb in fig.select({"type": ColorBar}):
            cb.update(major_label_text_font_size=px, title_text_font_size=px)


def later(make, **layout):
    """What ``make()`` returns, built and drawn once the page has loaded (Panel's ``defer_load``), not in the page's
    first document, which then holds what the first heatmap needs: the header, the sidebar and the hero.  The side's
    live plots are built this way (424 of the first document's 693 models, and a third of the server's answer to a
    new tab; issue 28, docs/latency.md).  ``layout``: the wrapper's own layout options (its place in a flex box)."""
    return pn.param.ParamFunction(make, defer_load=True, **{"sizing_mode": "stretch_width", "margin": 0, **layout})


def header_and_screen(session: BFTSession):
    """The header (title, points, status, message, the PNG export, the layout button, the theme) and the sidebar's
    *Screen* controls (layout and text size), each following the session's parameter of the same name."""
    status = LiveText(margin=(12, 10, 0, 10), width=310, height=24, name="bft-status").follow(session, "status")
    count = LiveText(margin=(12, 10, 0, 10), width=100, height=24, name="bft-count").follow(
        session, "data", lambda d: f"{len(d)} points")
    # the message line: one line of fixed height, always there (empty when there is nothing to say)
    message = LiveText(height=24, margin=(12, 10, 0, 10), css_classes=["bft-message"], name="bft-message",
                       styles={"flex": "1 1 200px", "min-width": "0", "color": "#b35900"},
                       sizing_mode="stretch_width").follow(session, "message")
    theme = pn.widgets.Toggle(label="◐ dark", width=90, margin=(8, 5, 0, 5), css_classes=["bft-theme"],
                              value=session.theme == "dark")
    theme.jscallback(args=dict(css=DARK_SHADOW_CSS), value=DARK_JS)
    # the theme is the session's (in the link): the toggle and the parameter follow each other
    theme.param.watch(user_action(lambda event: setattr(session, "theme", "dark" if event.new else "light")),
                      "value")
    def follow_theme(event) -> None:
        theme.value = event.new == "dark"
        apply_theme(pn.state.curdoc, event.new == "dark")
    session.param.watch(follow_theme, "theme")
    layout_select = pn.widgets.Select.from_param(session.param.layout, name="", width=120, margin=(8, 5, 0, 5),
                                                 css_classes=["bft-layout"])
    layout_select.jscallback(value=LAYOUT_JS)
    layout_toggle = pn.widgets.Button(label="⇆ layout", width=90, margin=(8, 5, 0, 5),
                                      css_classes=["bft-layout-toggle"],
                                      description="switch between the presenter and the workbench layout")
    layout_toggle.js_on_click(args=dict(select=layout_select, query=PRESENTER_QUERY), code=LAYOUT_TOGGLE_JS)
    font = pn.widgets.IntInput.from_param(session.param.font_size, name="", width=70, margin=(8, 5, 0, 5),
                                          css_classes=["bft-font-size"])
    font.jscallback(value=FONT_JS)
    session.param.watch(lambda event: apply_fonts(pn.state.curdoc, event.new), "font_size")
    # the fit's figure at projector resolution, from the declaration the CLI's --png draws (bftcore.outputs.figures)
    export = pn.widgets.FileDownload(callback=session.figure_png, filename="bftcore-fit.png",
                                     label="⤓ PNG (1920×1080)", width=150, margin=(8, 10, 0, 10),
                                     css_classes=["bft-export"],
                                     description="download the fit's figure as a PNG at projector resolution")
    title = pn.pane.HTML("<b>bftcore · Bayesian field theory</b>", margin=(12, 10, 0, 10),
                         styles={"font-size": "18px", "white-space": "nowrap"})
    header = pn.FlexBox(title, count, status, message, export, layout_toggle, theme, flex_wrap="nowrap",
                        sizing_mode="stretch_width", height=50, styles={"overflow": "hidden"})
    screen = pn.Column(pn.pane.Markdown("**Screen**", margin=(0, 10)),
                       pn.Row(pn.pane.Markdown("layout", margin=(14, 5, 0, 10)), layout_select,
                              pn.pane.Markdown("text (px)", margin=(14, 5, 0, 10)), font), margin=0)
    return header, screen


def build():
    session = BFTSession(doc=pn.state.curdoc)
    canvas = DataCanvas(session=session)
    # a local prior's labels per edge, under the curve they shape: built once a regression with a local prior is
    # shown (hidden without one after that)
    canvas.below.append(BuiltWhenShown(session, lambda: LocalStrip(session=session, hero=canvas.figure),
                                       lambda s: not s.kind.y_on_grid and bool((s.local_prior or {}).get("local")),
                                       ["local_prior", "model", "nx"]))
    prior = PriorView(session=session, canvas=canvas)
    controls = Controls(session=session)
    presets = PresetsView(session=session)
    share = SharePanel(session=session)
    header, screen = header_and_screen(session)
    regression_view = RegressionView(session=session)
    evidence_view = EvidenceView(session=session, canvas=canvas, regression=regression_view)
    # beside the heatmap, so that its curve and the band on the heatmap follow the clicks; it computes only while
    # open (30 sessions of a class would otherwise each solve a path of 25 fits after every click)
    # its contents (controls, the evidence plot, the explanation: 70 models) are built when the card is first opened
    evidence_card = pn.Card(pn.Spacer(visible=False, margin=0), title="Evidence: choose λ from the data",
                            collapsed=True,
                            sizing_mode="stretch_width", margin=(5, 0), css_classes=["bft-evidence-card"],
                            header_background="#f3f3f3")
    # the posterior on the hero plot (issue 28): the band of h(x) on the heatmap, draws of h on a regression curve;
    # computed with the evidence (app.views.evidence), while this toggle is on or the evidence card is open
    uncertainty = pn.widgets.Checkbox(name="posterior band / samples on the plot", margin=(22, 5, 0, 10),
                                      css_classes=["bft-uncertainty"])
    canvas.extras.append(uncertainty)

    def follow_posterior(_event=None):
        if not evidence_card.collapsed and isinstance(evidence_card.objects[0], pn.Spacer):
            evidence_card.objects = [evidence_view]  # first opened: its contents now
        evidence_view.set_active(uncertainty.value or not evidence_card.collapsed)
    evidence_card.param.watch(user_action(follow_posterior), "collapsed")
    uncertainty.param.watch(user_action(follow_posterior), "value")

    def side_tiles():
        """The live plots beside the heatmap as tiles, built once the page has loaded (they read the session's
        state when built: the frames so far are drawn): two abreast in the presenter layout (mixing | traces, then
        the overfitting curve | the branches, the alarms at the top), all on screen at 1280x720; the rest in full
        rows below (their equations and "What this shows" cards last, so the error traces are seen without
        scrolling)."""
        mixing_view = MixingView(session=session, thumbnails=prior.thumbnails())
        traces_view = TracesView(session=session)
        # the overfitting alarm and its curve right under the traces, the branch diagram and the metastability
        # alarm beside the heatmap for a mixture (issue 28)
        overfitting_view = OverfittingView(session=session)
        metastability_view = MetastabilityView(session=session)

        def tile(view, full=False):
            return pn.Column(view, sizing_mode="stretch_width", margin=0, styles={} if full else TILE_STYLE)
        alarms = pn.Column(overfitting_view.alarm, metastability_view.alarm_row(), sizing_mode="stretch_width",
                           margin=0, css_classes=["bft-alarms"])
        return pn.FlexBox(tile(alarms, full=True), tile(mixing_view), tile(traces_view), tile(overfitting_view),
                          # the branch diagram of a mixture: built once the session has branches
                          tile(BuiltWhenShown(session, lambda: BranchDiagram(session=session),
                                              lambda s: s.branches is not None, ["branches"])),
                          # the BYY mixture of a 1-D density, beside the traces: built once a 1-D density is shown
                          tile(BuiltWhenShown(session, lambda: BYYView(session=session),
                                              lambda s: s.kind.name == "density_1d", ["model", "nx", "method"])),
                          *(tile(v, full=True) for v in (traces_view.playback, prior.slice_panel(), regression_view,
                                                         evidence_card, mixing_view.explanation(),
                                                         traces_view.explanation())),
                          flex_wrap="wrap", styles={"align-content": "flex-start"}, margin=0,
                          stylesheets=NO_SHRINK, sizing_mode="stretch_width")
    side = later(side_tiles, styles=SIDE_STYLE, stylesheets=NO_SHRINK, css_classes=["bft-side"])
    hero = pn.Column(canvas, styles=HERO_STYLE, margin=0, sizing_mode="stretch_both", css_classes=["bft-hero-box"],
                     stylesheets=NO_SHRINK)
    live = pn.FlexBox(hero, side, flex_wrap="wrap", sizing_mode="stretch_width", css_classes=["bft-live"])
    # dynamic: a tab is drawn when it is opened (the first time about 0.6 s, then ~0.1 s), so that a preset load
    # lays out the plots on screen only, not the hidden prior samples and sweep (preset loads: 450-650 -> 300-500 ms)
    sweep_view = SweepView(session=session)
    tabs = pn.Tabs(("Live fit", live), ("Prior", prior.samples_panel()), ("β sweep", sweep_view),
                   # built when first opened (its figures cost every new page 0.25 s of server time otherwise)
                   ("Learning curve", pn.param.ParamFunction(lambda: LearningView(session=session), lazy=True,
                                                                      sizing_mode="stretch_width", margin=0)),
                   ("Information and hyperpriors", pn.param.ParamFunction(lambda: InformationView(), lazy=True,
                                                                          sizing_mode="stretch_width", margin=0)),
                   ("Image completion", pn.param.ParamFunction(lambda: ImageCompletionView(), lazy=True,
                                                               sizing_mode="stretch_width", margin=0)),
                   ("About", pn.pane.Markdown(ABOUT, max_width=800)), dynamic=True, sizing_mode="stretch_width",
                   styles={"flex": "1 1 420px", "min-width": "min(420px, 100%)"},
                   # the tab's column at most the window: BokehJS' "auto" track took the content's min-content width
                   # (480 px at 390: the canvas was clipped)
                   stylesheets=[":host { grid-template-columns: minmax(0, 1fr) !important; }"])
    # the HoloViews plots of a tab are drawn while it is open (Panel keeps a tab rendered once it was opened)
    shown = {1: prior.show_samples, 2: sweep_view.show_tab}

    def tab_opened(active: int) -> None:
        for index, show in shown.items():
            show(index == active)
    tab_opened(tabs.active)
    tabs.param.watch(lambda event: tab_opened(event.new), "active")
    sidebar = pn.Column(pn.pane.Markdown("**Presets**", margin=(0, 10)), presets, controls,
                        screen, pn.pane.Markdown("**Share and export**", margin=(0, 10)), share,
                        styles=SIDEBAR_STYLE, margin=0, stylesheets=NO_SHRINK, css_classes=["bft-sidebar"])
    layout = pn.Column(header, pn.FlexBox(sidebar, tabs, flex_wrap="wrap", sizing_mode="stretch_width"),
                       sizing_mode="stretch_width")
    SharePanel.sync_url(session)
    install_browser_patches(pn.state.curdoc)
    pn.state.curdoc.js_on_event("document_ready", CustomJS(args=dict(labels={**ARIA, **LATER_ARIA}), code=ARIA_JS))
    # the layout, font size and theme of the link (read above by sync_url), on the page before its first paint
    pn.state.curdoc.js_on_event("document_ready", CustomJS(
        args=dict(layout=session.layout, size=session.font_size, dark=session.theme == "dark", css=DARK_SHADOW_CSS),
        code=INITIAL_JS))
    pn.state.on_session_destroyed(lambda ctx: session.close())
    # a closed tab ends the session's work at once: Bokeh discards the session only 15-30 s later, and until then its
    # run played on and its diagnostics ran for no one (about 1 s of CPU per second for 2-4 s after each closed tab,
    # taken from the next tab's page).  A lost connection is final: BokehJS does not reconnect (Panel's
    # ``config.reconnect`` is off), so the page can never use this session again.  Closed at the next tick, under the
    # document's lock (the event comes from the websocket's own close, outside it; the session's models change).
    doc = pn.state.curdoc
    doc.on_event("connection_lost", lambda event: doc.add_next_tick_callback(session.close))
    # the first frame now, in the document the browser loads (issue 28: a new tab showed its first heatmap only
    # after it had been drawn and had told the server so); the run plays on once the page has loaded
    session.first_frame()
    pn.state.onload(session.play)
    layout.servable(title="bftcore dashboard")
    # after servable, which registered the deferred parts' builds (later()) as load callbacks: the link's font size
    # and theme reach their plots too, once they exist
    if session.font_size != DEFAULT_FONT or session.theme == "dark":
        pn.state.onload(lambda: (apply_fonts(pn.state.curdoc, session.font_size),
                                 apply_theme(pn.state.curdoc, session.theme == "dark")))
    return layout


build()
