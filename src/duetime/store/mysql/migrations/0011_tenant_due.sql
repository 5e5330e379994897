-- Tenant fairness (docs/flow-control.md, "Tenant fairness"): the due jobs of each tenant in
-- claim order, so a claim finds the tenants with due work (next_due_tenant, one seek each)
-- and reads a tenant's first due jobs (tenant_candidates) without sorting them. No partial
-- index here: status first, as in duetime_jobs_due_any.
CREATE INDEX duetime_jobs_tenant_due ON duetime_jobs (status, tenant, neg_priority, due_at, id);
