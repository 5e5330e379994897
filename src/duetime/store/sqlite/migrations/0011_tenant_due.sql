-- Tenant fairness (docs/flow-control.md, "Tenant fairness"): the due jobs of each tenant in
-- claim order, so a claim finds the tenants with due work (next_due_tenant, one seek each)
-- and reads a tenant's first due jobs (tenant_candidates) without sorting them.
CREATE INDEX duetime_jobs_tenant_due ON duetime_jobs (tenant, priority DESC, due_at, id)
    WHERE status = 'scheduled';
