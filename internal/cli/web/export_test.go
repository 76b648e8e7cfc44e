package web

// RunWeb is runWeb, for tests that wrap the Options the command built.
var RunWeb = runWeb
