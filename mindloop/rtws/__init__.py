"""The runtime workspace (rtws): the user's project directory and its mindloop layout."""

from mindloop.rtws.scaffold import InitReport, init_rtws

__all__ = ["InitReport", "init_rtws"]
