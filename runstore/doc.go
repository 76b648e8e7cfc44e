// Package runstore keeps a workflow run's durable state where the reference keeps it: the
// step journal on the stream WFJ_<space> (one subject per run, every append fenced by
// Nats-Expected-Last-Subject-Sequence behind an activation record that carries the
// driver's fencing token and epoch), and the run's spec, status, program and answers in
// the records bucket cotal_records_<space>. Every record is the reference's JSON shape,
// decoded closed where the reference refuses unknown fields.
//
// A driver replays a run's journal and activates it (Activate); the Appender it gets
// back appends step records until the stream refuses one, which means another driver
// activated (ErrSuperseded): the Appender is then finished, and so is its driver.
package runstore
