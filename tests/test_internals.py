"""The private framework use of app.transport that is not the transport itself: param's check of a value without
setting it.  It fails loudly on a param where Parameter._validate no longer refuses, or sets the value."""
import param
import pytest

from app.session import BFTSession
from app.transport import check_value


def test_check_value_refuses_without_setting():
    class P(param.Parameterized):
        x = param.Number(1.0, bounds=(0, 2))
        names = param.List([], item_type=str)

    p = P()
    with pytest.raises(ValueError, match="at most 2"):
        check_value(p.param["x"], 3.0)
    with pytest.raises((ValueError, TypeError)):
        check_value(p.param["names"], [1])
    check_value(p.param["x"], 1.5)                 # accepted values pass
    assert p.x == 1.0 and p.names == []            # and nothing is set


def test_check_value_runs_the_dashboards_own_parameter_rules():
    s = BFTSession(live=False)
    before = list(s.data)
    with pytest.raises(ValueError):
        check_value(s.param["data"], [[1.0]])    # a point is a pair (app.session._Points)
    with pytest.raises(ValueError):
        check_value(s.param["lam"], -1.0)
    assert s.data == before
