"""The context engine: what each model request holds, and how it stays within the model's window.

Budgets (``budget.py``), the turn ledger (``ledger.py``), plain-text tool digests and recent files
(``digests.py``), request layout (``layout.py``), compaction and its fallback (``compaction.py``,
``compactor.py``), overflow recognition (``overflow.py``) and the window learned from a server that takes
less than the catalog says (``window.py``). The turn loop (``brain/session.py``) calls it;
nothing here imports the turn loop.
"""
