package io.github.raftlock;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * Test classes on the run's shared cluster ({@link TestCluster#shared()}), each with a
 * client of its own for its tests. Classes run one after another, so one field serves.
 */
abstract class OnSharedCluster {
    static RaftlockClient client;

    @BeforeAll
    static void connect() {
        client = TestCluster.shared().client();
    }

    @AfterAll
    static void close() {
        client.close();
    }
}
