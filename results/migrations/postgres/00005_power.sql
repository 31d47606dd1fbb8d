-- Power figures of a perf result (package energy, issue 37): the source of
-- the samples (part of the measurement profile: figures of two sources are
-- never compared), the power gate's verdict and reasons, and InferenceX's
-- headline figures as columns for queries (starter stats, nightly). The
-- whole figure set stays in the row's json. A row without power (measured
-- before, or on a cluster without a power source) has power_source ''.

-- +goose Up
ALTER TABLE perf_results ADD COLUMN power_source TEXT NOT NULL DEFAULT '';
ALTER TABLE perf_results ADD COLUMN power_valid BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE perf_results ADD COLUMN power_reasons TEXT NOT NULL DEFAULT '';
ALTER TABLE perf_results ADD COLUMN total_gpu_energy_j DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE perf_results ADD COLUMN avg_power_w DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE perf_results ADD COLUMN joules_per_output_token DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE perf_results ADD COLUMN joules_per_total_token DOUBLE PRECISION NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE perf_results DROP COLUMN joules_per_total_token;
ALTER TABLE perf_results DROP COLUMN joules_per_output_token;
ALTER TABLE perf_results DROP COLUMN avg_power_w;
ALTER TABLE perf_results DROP COLUMN total_gpu_energy_j;
ALTER TABLE perf_results DROP COLUMN power_reasons;
ALTER TABLE perf_results DROP COLUMN power_valid;
ALTER TABLE perf_results DROP COLUMN power_source;
