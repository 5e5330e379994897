-- Node tasks (SQLite): the tasks each node's worker serves (JSON list; NULL: registered by a
-- version that did not say), so a job no live node serves can say so.
ALTER TABLE duetime_nodes ADD COLUMN tasks TEXT;
