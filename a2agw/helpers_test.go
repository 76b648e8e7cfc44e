package a2agw_test

import (
	"net"
	"os"
)

type net_TCPAddr = net.TCPAddr

type fileInfo struct {
	data []byte
	mode os.FileMode
}

func readFile(path string) (fileInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileInfo{}, err
	}
	b, err := os.ReadFile(path)
	return fileInfo{data: b, mode: st.Mode().Perm()}, err
}
