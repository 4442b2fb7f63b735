import Glibc

/// One engine may be shared by threads of an app; its SQLite connection may not. Recursive: a
/// batch (`KeychainStore.batch`) holds it while the operations inside take it again.
package final class Mutex: @unchecked Sendable {
    private var mutex = pthread_mutex_t()

    package init() {
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(&mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }
    deinit { pthread_mutex_destroy(&mutex) }

    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body()
    }
}
