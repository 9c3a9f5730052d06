"""A node's results across campaigns: the history store, change points, and what changed with them.

- `summary`: one campaign -> one entry per (node, probe variant) and the node facts it recorded.
- `store`: where entries live: a directory in the campaign store's format (`directory`) or PostgreSQL
  (`postgres`), behind one interface (`open_history`).
- `changepoint`: the change-point rule for one series (any series in time order), with the fleet's noise.
- `changes`: change points of each node's series of medians, matched with fact changes and notes;
  fleet events.
- `show`, `report`: the terminal / JSON / Prometheus answer and the offline HTML report.
- `cli`: the `history` verb and the `--history` option of `check`, `campaign collect` and `analyze`.
"""
