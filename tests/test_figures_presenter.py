"""Issue 28: the PNG (1920x1080) holds the whole presenter screen: title, alarms, the fit, the traces and the lambda
curve, at exactly the projector's size."""
import io

import numpy as np
from PIL import Image

from bftcore import api
from bftcore.outputs import figures
from bftcore.outputs.documents import record_document


def test_presenter_png_is_the_whole_screen_at_1920x1080():
    from app.session import BFTSession
    s = BFTSession()
    s.load_preset("overfitting")
    s.lam = 0.01
    s.solve()
    s.check_overfitting()
    screen = s.screen()
    assert screen["title"].startswith("bftcore · ") and "λ = 0.01" in screen["title"]
    assert screen["alarms"] and screen["alarms"][0].startswith("overfitting")
    assert screen["traces"]["scan"] is not None and len(screen["traces"]["energy"]) == len(s.history)
    cfg = api.validate_config(s.to_config())
    png = figures.presenter_png(cfg, record_document(cfg, s.record, None), screen["traces"], screen["title"],
                                screen["alarms"])
    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    assert img.shape == (1080, 1920, 3)
    # the fit's heatmap on the left (both ends of the colour map), the alarm's dark red text at the top, curves on
    # the right (non-white pixels in the right 40 % below the header)
    left = img[:, :1100].reshape(-1, 3)
    for t in (0.0, 1.0):
        assert np.all(left == figures.colormap(t), axis=1).sum() > 100
    header = img[:int(1080 * figures.PRESENTER_HEADER)]
    assert np.all(header == (0x8b, 0, 0), axis=2).sum() > 50
    right = img[200:, 1200:]
    assert (right.sum(axis=2) < 600).mean() > 0.01
