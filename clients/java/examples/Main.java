import io.github.raftlock.DistributedLock;
import io.github.raftlock.LockGuard;
import io.github.raftlock.RaftlockClient;
import io.github.raftlock.Session;
import java.time.Duration;

/** Takes a lock on the cluster RAFTLOCK_ENDPOINTS names and prints its fencing token. */
public class Main {
    public static void main(String[] args) throws Exception {
        try (RaftlockClient client = RaftlockClient.fromEnv();
             Session session = client.newSession(Duration.ofSeconds(10))) {
            DistributedLock lock = session.lock("jobs/nightly");
            try (LockGuard guard = lock.acquire(Duration.ofSeconds(30))) {
                System.out.println("holding jobs/nightly with fencing token " + guard.token());
                // Pass guard.token() with every write to what the lock protects.
            }
        }
    }
}
