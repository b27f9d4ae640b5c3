package slurm

import (
	"context"
	"testing"
	"time"
)

// diagJSON is an abridged answer of slurmrestd 24.11 to GET /diag/ (the same fields in both
// API versions).
const diagJSON = `{"statistics":{"server_thread_count":3,"agent_queue_size":1,"dbd_agent_queue_size":2,
 "jobs_submitted":40,"jobs_started":30,"jobs_completed":25,"jobs_canceled":4,"jobs_failed":1,"jobs_pending":6,"jobs_running":5,
 "schedule_cycle_last":1500,"schedule_cycle_max":90000,"schedule_cycle_mean":2500,"schedule_cycle_total":120,
 "schedule_cycle_per_minute":2,"schedule_cycle_mean_depth":7,"schedule_queue_length":6,
 "bf_active":true,"bf_cycle_last":4000,"bf_cycle_max":80000,"bf_cycle_mean":5000,"bf_cycle_counter":11,
 "bf_backfilled_jobs":9,"bf_last_backfilled_jobs":2,"bf_last_depth":6,"bf_last_depth_try":3,"bf_depth_mean":5,"bf_queue_len":4,
 "bf_when_last_cycle":{"set":true,"infinite":false,"number":1700000050},
 "req_time":{"set":true,"infinite":false,"number":1700000100},
 "req_time_start":{"set":true,"infinite":false,"number":1699920000}},"errors":[],"warnings":[]}`

func TestDiagDecodes(t *testing.T) {
	for _, v := range []string{V0041, V0042} {
		t.Run(v, func(t *testing.T) {
			s := newServer(t, jsonReply(200, diagJSON))
			d, err := newTestClient(t, s.URL, v, nil).Diag(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := Diag{
				ServerThreadCount: 3, AgentQueueSize: 1, DBDAgentQueueSize: 2,
				JobsSubmitted: 40, JobsStarted: 30, JobsCompleted: 25, JobsCanceled: 4, JobsFailed: 1, JobsPending: 6, JobsRunning: 5,
				ScheduleCycleLast: 1500 * time.Microsecond, ScheduleCycleMax: 90 * time.Millisecond,
				ScheduleCycleMean: 2500 * time.Microsecond, ScheduleCycles: 120, ScheduleCyclesPerMinute: 2,
				ScheduleCycleMeanDepth: 7, ScheduleQueueLength: 6,
				BackfillActive: true, BackfillCycleLast: 4 * time.Millisecond, BackfillCycleMax: 80 * time.Millisecond,
				BackfillCycleMean: 5 * time.Millisecond, BackfillCycles: 11, BackfillJobs: 9, BackfillLastJobs: 2,
				BackfillLastDepth: 6, BackfillLastDepthTry: 3, BackfillDepthMean: 5, BackfillQueueLength: 4,
				BackfillLastCycle: time.Unix(1700000050, 0), RequestTime: time.Unix(1700000100, 0), ResetTime: time.Unix(1699920000, 0),
			}
			if *d != want {
				t.Fatalf("decoded\n %+v\nwant\n %+v", *d, want)
			}
			if p := s.requests()[0].URL.Path; p != "/slurm/"+v+"/diag/" {
				t.Fatalf("path %s", p)
			}
		})
	}
}
