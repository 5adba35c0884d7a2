package io.github.raftlock;

/**
 * One node's view of the cluster, from {@link RaftlockClient#status()}.
 *
 * <pre>{@code
 * ClusterStatus st = client.status();
 * System.out.println("node " + st.nodeId() + " is " + st.role() + ", leader " + st.leaderAddr());
 * }</pre>
 *
 * @param nodeId the answering node's id
 * @param role its Raft role: leader, follower, candidate, learner, shutdown or unspecified
 * @param term the current Raft term
 * @param leaderId the leader it knows of (0: none)
 * @param leaderAddr the leader's client address ({@code ""}: none)
 */
public record ClusterStatus(long nodeId, String role, long term, long leaderId, String leaderAddr) {}
