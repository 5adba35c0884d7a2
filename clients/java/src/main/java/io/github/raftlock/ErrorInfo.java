package io.github.raftlock;

/**
 * What an error says, before it is typed by {@link Errors#of}: one carrier for the
 * fields every exception class shares, so that adding a reason adds one class and one
 * line of the mapping and nothing else.
 */
final class ErrorInfo {
    String reason = "";
    String code = "UNKNOWN";
    String message = "";
    String leader = "";
    int httpStatus;
    boolean notSent;
    // A verdict of this client's own (Errors.KIND_*), "" for what a server said.
    String kind = "";
    Throwable cause;

    ErrorInfo(String reason, String code, String message) {
        this.reason = reason;
        this.code = code;
        this.message = message;
    }
}
