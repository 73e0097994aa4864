module github.com/qsplice/qsplice

go 1.26.8

require (
	github.com/gopacket/gopacket v1.7.7
	github.com/mdlayher/packet v1.2.0
	github.com/songgao/water v0.0.0-20200317203138-2b4b6d7c09d8
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/mdlayher/socket v0.7.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
)
