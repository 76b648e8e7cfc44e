// An issue orchestrator: a person picks the issue, a worker fixes it, two
// reviewers grade the fix side by side, and a merge seat lands it.
const chosen = await checkpoint("pick-issue", "Which issue? Answer {\"issue\": N}.", { timeout: "1d" })
const issue = chosen.value?.issue ?? 0
assert(typeof issue === "number" && issue > 0, "the answer must name a positive issue number")

const worker = await spawn("worker", { worktree: `issue-${issue}`, permits: { turns: 4 } })
await notify([worker], { decision: "assign", outcome: "fix", detail: { issue } })
await turn(worker, { name: "fix", deadline: "4h" })
const fix = await ask(worker, { name: "fixed", schema: { sha: "string" }, deadline: "30m", attempts: 2 })

const reviews = await fanOut(["left", "right"], async (side) => {
  const seat = await spawn(`reviewer-${side}`, { name: "reviewer", worktree: `review-${issue}-${side}` })
  await turn(seat, { name: "review", deadline: "2h" })
  return await ask(seat, { name: "verdict", schema: { approve: "boolean" } })
}, { name: "reviews", key: (side) => side })

const approvals = filter(reviews, (r) => r.approve).length
let outcome = "blocked"
if (approvals === len(reviews)) {
  const merger = await spawn("merger")
  const merged = await race({
    landed: () => turn(merger, { name: "merge", deadline: "1h" }),
    stalled: () => sleep("2h", { name: "merge-timeout" }),
  }, { name: "merge-or-give-up" })
  outcome = merged.index === "landed" ? "merged" : "stalled"
}
log("issue", issue, outcome, fix.sha, `${approvals}/${len(reviews)}`)
