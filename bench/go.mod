module github.com/bindery-dev/bindery/bench

go 1.26.8

replace github.com/bindery-dev/bindery => ../

require github.com/bindery-dev/bindery v0.0.0-00010101000000-000000000000

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/pivotal-cf/brokerapi/v12 v12.0.0 // indirect
)
