-- PostgreSQL's migration 29 drops the index of the start of the successes kept on their jobs'
-- rows (its stats' samples read them by their end). MariaDB/MySQL keep no success on its
-- job's row (each is an attempt row, read through duetime_attempts_started): nothing to drop
-- here. The migration keeps the dialects' versions alike.
DO 0;
