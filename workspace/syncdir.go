package workspace

// SyncDir fsyncs a folder so that a rename or removal inside it survives a crash. On
// systems where folders cannot be synced it does nothing.
func SyncDir(dir string) error { return syncDir(dir) }
