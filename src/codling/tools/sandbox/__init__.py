"""The sandbox commands run in: what a session's commands may touch (``policy.py``), how a process is confined
to it (``confine.py``, standard library only: the reaper loads it by path), what it blocked, in words
(``blocked.py``), and ``codling sandbox check`` (``check.py``)."""
